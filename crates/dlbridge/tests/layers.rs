//! The layers of the crate point one way. Every `crate::` path in `src/` (code and tests, not
//! comments) is read, and a module may name only modules of a lower layer or modules listed
//! before it in its own layer. `LAYERS` is the one table of the layers; docs/ARCHITECTURE.md
//! explains it. Paths through the crate root's re-exports (`crate::Tensor`) count as paths to
//! the module that defines them. `circles` (layers/circles.rs) draws the finer graph, one
//! module a file, and allows one circle in it.

#[path = "layers/circles.rs"]
mod circles;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The layers, lowest first; within a layer, a module may name the modules before it.
const LAYERS: &[(&str, &[&str])] = &[
    ("C mirrors", &["ffi"]),
    (
        "value types",
        &["dims", "device", "error", "dtype", "layout"],
    ),
    ("tensor", &["tensor", "ndarray_interop", "wire"]),
    ("copies and devices", &["copy", "cuda", "shared"]),
    ("protocols", &["managed", "export", "arrow"]),
    ("python", &["python"]),
];

/// Position of a top-level module in the order of `LAYERS` (lower may not name higher).
fn rank(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .flat_map(|(_, modules)| modules.iter())
        .position(|m| *m == module)
}

fn layer_name(module: &str) -> &'static str {
    LAYERS
        .iter()
        .find(|(_, modules)| modules.contains(&module))
        .map_or("?", |(name, _)| name)
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`None` for `lib.rs`, the crate root).
fn top_module(file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src_dir()).unwrap();
    let first = relative.components().next()?.as_os_str().to_str()?;
    match first.strip_suffix(".rs") {
        Some("lib") => None,
        Some(stem) => Some(stem.to_owned()),
        None => Some(first.to_owned()),
    }
}

/// The source without `//` comments (doc links are not imports).
fn without_comments(source: &str) -> String {
    source
        .lines()
        .map(|line| line.find("//").map_or(line, |i| &line[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The first path segment after each `crate::`, and for `crate::{a, b::c}` each item's first.
fn crate_paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(is_ident_char) {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => return true,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    false
                })
                .map_or(group.len(), |(i, _)| i);
            let mut depth = 0;
            let mut item = String::new();
            for c in group[..end].chars().chain(std::iter::once(',')) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        let first: String = item
                            .trim()
                            .chars()
                            .take_while(|c| is_ident_char(*c))
                            .collect();
                        if !first.is_empty() {
                            found.push(first);
                        }
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
        } else {
            let first: String = rest.chars().take_while(|c| is_ident_char(*c)).collect();
            found.push(first);
        }
    }
    found
}

/// Names the crate root re-exports (`pub use tensor::{Tensor, ...};`), with their modules.
fn root_reexports() -> BTreeMap<String, String> {
    let lib = without_comments(&fs::read_to_string(src_dir().join("lib.rs")).unwrap());
    let mut names = BTreeMap::new();
    for statement in lib.split(';') {
        let Some(path) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        let (module, items) = path.split_once("::").unwrap();
        let items = items.trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let name = item.trim().rsplit("::").next().unwrap().trim();
            if !name.is_empty() {
                names.insert(name.to_owned(), module.trim().to_owned());
            }
        }
    }
    names
}

/// Every (file, module it is in, module it names) in `src/`.
fn edges() -> Vec<(PathBuf, String, String)> {
    let reexports = root_reexports();
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    files.sort();
    let mut edges = Vec::new();
    for file in files {
        let Some(from) = top_module(&file) else {
            continue;
        };
        let code = without_comments(&fs::read_to_string(&file).unwrap());
        for first in crate_paths(&code) {
            let to = if rank(&first).is_some() {
                first
            } else if let Some(module) = reexports.get(&first) {
                module.clone()
            } else {
                panic!(
                    "{}: `crate::{first}` is neither a module of LAYERS nor a root re-export",
                    file.display()
                );
            };
            if to != from {
                edges.push((file.clone(), from.clone(), to));
            }
        }
    }
    edges
}

#[test]
fn every_top_level_module_has_a_layer() {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    for file in files {
        if let Some(module) = top_module(&file) {
            assert!(
                rank(&module).is_some(),
                "module `{module}` ({}) is in no layer of LAYERS",
                file.display()
            );
        }
    }
}

#[test]
fn imports_point_down_or_back_within_a_layer() {
    let edges = edges();
    assert!(
        edges.len() > 50,
        "the scan found too few paths: {}",
        edges.len()
    );
    let upward: Vec<String> = edges
        .iter()
        .filter(|(_, from, to)| rank(to) > rank(from))
        .map(|(file, from, to)| {
            format!(
                "{}: `{from}` ({}) names `{to}` ({})",
                file.strip_prefix(src_dir()).unwrap().display(),
                layer_name(from),
                layer_name(to)
            )
        })
        .collect();
    assert!(
        upward.is_empty(),
        "imports that point up:\n{}",
        upward.join("\n")
    );
}

#[test]
fn only_python_touches_pyo3() {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    for file in files {
        if top_module(&file).as_deref() == Some("python") {
            continue;
        }
        let code = without_comments(&fs::read_to_string(&file).unwrap());
        assert!(
            !code.contains("pyo3::"),
            "{} uses pyo3 outside python/",
            file.display()
        );
    }
}

#[test]
fn the_scanner_reads_grouped_and_nested_paths() {
    let code = "use crate::{a, b::{c, d}, e::f as g};\nlet x = crate::h::i(); my_crate::j;";
    assert_eq!(crate_paths(code), ["a", "b", "e", "h"]);
    assert_eq!(without_comments("x // crate::y\n/// crate::z"), "x \n");
}

/// The pure-Python modules and subpackages of the dlbridge Python package (`python/dlbridge`),
/// by name: every `.py` module and every directory with an `__init__.py`.
fn python_modules() -> Vec<String> {
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/dlbridge");
    let mut names = Vec::new();
    for entry in fs::read_dir(package).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let is_module = path.extension().is_some_and(|e| e == "py") && name != "__init__";
        if is_module || path.join("__init__.py").exists() {
            names.push(name);
        }
    }
    names
}

/// The string literals of `code` that name a module of `modules` of the dlbridge package, or
/// something in one (`"dlbridge.host"`, `"dlbridge.plan.build"`), and imports of the package
/// itself (`import("dlbridge")`, from which any of its modules can be reached).
fn python_module_names(code: &str, modules: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for line in code.lines() {
        for (at, _) in line.match_indices("\"dlbridge") {
            let rest = &line[at + 1..];
            let path: String = rest
                .chars()
                .take_while(|&c| is_ident_char(c) || c == '.')
                .collect();
            if !rest[path.len()..].starts_with('"') {
                continue; // text that mentions dlbridge, not a module path
            }
            let first = path.split('.').nth(1);
            let names_module = first.is_some_and(|m| modules.iter().any(|n| n == m));
            let before = line[..at].trim_end();
            let imports_package = path == "dlbridge"
                && before.contains("import")
                && (before.ends_with('(') || before.ends_with(','));
            if names_module || imports_package {
                found.push(path);
            }
        }
    }
    found
}

/// The language boundary runs one way: Python calls Rust, and Rust reaches the package's
/// Python code only through what the package registers at import (`_register_fallbacks`),
/// never by importing one of its pure-Python modules by name.
#[test]
fn no_rust_source_imports_a_python_module_of_the_package() {
    let modules = python_modules();
    assert!(
        ["convert", "host", "plan", "namespaces"]
            .iter()
            .all(|m| modules.iter().any(|n| n == m)),
        "the package's modules were not found: {modules:?}"
    );
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    let mut named = Vec::new();
    for file in files {
        let code = without_comments(&fs::read_to_string(&file).unwrap());
        for path in python_module_names(&code, &modules) {
            let file = file.strip_prefix(src_dir()).unwrap().display().to_string();
            named.push(format!("{file}: \"{path}\""));
        }
    }
    assert!(
        named.is_empty(),
        "Rust names the dlbridge package's Python modules (hand the function over at import \
         instead, through `_register_fallbacks`):\n{}",
        named.join("\n")
    );
}

#[test]
fn the_boundary_scanner_finds_module_paths_and_package_imports() {
    let modules = ["host".to_owned(), "plan".to_owned()];
    let code = r#"import(py, "dlbridge.host", "f"); "dlbridge.plan.build"; "dlbridge._native";
    "dlbridge.host(x) is text"; py.import("dlbridge")?; "dlbridge""#;
    assert_eq!(
        python_module_names(code, &modules),
        ["dlbridge.host", "dlbridge.plan.build", "dlbridge"]
    );
}
