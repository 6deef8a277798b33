//! Circles in the module graph. Every file of `src/` is a module (`arrow/owned.rs` is
//! `arrow::owned`, `arrow/mod.rs` is `arrow`); a module names another when one of its
//! `crate::` or `super::` paths (code and tests, not comments or strings) leads there, through
//! the `pub use` re-exports of the modules on the way. A module may name its descendants
//! without counting: a parent declares its children, re-exports their items and holds what
//! they share. A circle is a set of modules each of which reaches all the others through such
//! names (a strongly connected component of more than one module). `KNOWN_CIRCLES` lists the
//! one circle the crate has, which docs/ARCHITECTURE.md explains; any other fails.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use super::{is_ident_char, rust_files, src_dir};

/// The circles the crate has on purpose, each as its sorted modules: at most one.
const KNOWN_CIRCLES: &[&[&str]] = &[&["python::module::exchange", "python::module::tensor"]];

/// A module's path from the crate root (`[]` for `lib.rs`).
type ModPath = Vec<String>;

fn module_of(file: &Path) -> ModPath {
    let relative = file.strip_prefix(src_dir()).unwrap().with_extension("");
    let mut path: ModPath = relative
        .components()
        .map(|c| c.as_os_str().to_str().unwrap().to_owned())
        .collect();
    if matches!(path.last().map(String::as_str), Some("mod" | "lib")) {
        path.pop();
    }
    path
}

fn spelled(path: &[String]) -> String {
    path.join("::")
}

/// The code with comments, strings and character literals left out: their text is not code,
/// and their braces would miscount the nesting of inline modules.
fn code_only(source: &str) -> Vec<char> {
    let c: Vec<char> = source.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        if at(i) == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if at(i) == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if at(i) == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if at(i) == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if let Some(hashes) = raw_string_at(&c, i) {
            i += hashes + 2;
            while i < c.len() && !(c[i] == '"' && (1..=hashes).all(|k| at(i + k) == '#')) {
                i += 1;
            }
            i += hashes + 1;
            out.extend(['"', '"']);
        } else if at(i) == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.extend(['"', '"']);
        } else if at(i) == '\'' && at(i + 1) == '\\' {
            i += 3;
            while i < c.len() && c[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.extend(['\'', ' ', '\'']);
        } else if at(i) == '\'' && at(i + 2) == '\'' {
            i += 3;
            out.extend(['\'', ' ', '\'']);
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// The number of `#` of the raw string (`r"`, `r#"`, `br"`) that starts at `c[i]`, if one does.
fn raw_string_at(c: &[char], i: usize) -> Option<usize> {
    let word_start = |k: usize| k == 0 || !is_ident_char(c[k - 1]);
    let prefix_ok = word_start(i) || (c[i - 1] == 'b' && word_start(i - 1));
    if c[i] != 'r' || !prefix_ok {
        return None;
    }
    let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
    (c.get(i + 1 + hashes) == Some(&'"')).then_some(hashes)
}

fn skip_space(code: &[char], mut i: usize) -> usize {
    while code.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    i
}

fn word_at(code: &[char], i: usize) -> String {
    code[i.min(code.len())..]
        .iter()
        .take_while(|&&c| is_ident_char(c) || c == '*')
        .collect()
}

/// The paths of the use tree or path expression at `code[i..]`, each with the name it is known
/// by (`a::{b, c::d as e}` gives `a::b` as `b` and `a::c::d` as `e`); returns where it ends.
fn path_tree(
    code: &[char],
    i: usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, String)>,
) -> usize {
    let mut segments = prefix.to_vec();
    let mut i = skip_space(code, i);
    loop {
        if code.get(i) == Some(&'{') {
            i += 1;
            loop {
                i = skip_space(code, i);
                match code.get(i) {
                    None => return i,
                    Some('}') => return i + 1,
                    Some(',') => i += 1,
                    Some(_) => i = path_tree(code, i, &segments, out),
                }
            }
        }
        let word = word_at(code, i);
        if word.is_empty() {
            if let Some(last) = segments.last() {
                out.push((segments.clone(), last.clone()));
            }
            return i;
        }
        i += word.chars().count();
        segments.push(word);
        let after = skip_space(code, i);
        if code.get(after) == Some(&':') && code.get(after + 1) == Some(&':') {
            i = skip_space(code, after + 2);
            continue;
        }
        let mut name = segments.last().unwrap().clone();
        if word_at(code, after) == "as" {
            let alias = skip_space(code, after + 2);
            name = word_at(code, alias);
            i = alias + name.chars().count();
        }
        out.push((segments, name));
        return i;
    }
}

/// What one file names: each `crate::` and `super::` path, made absolute (an inline module's
/// name stays in the path: resolving stops there, in the file's module), and each `pub use`
/// of the file's module, by the name it is known by.
struct Scan {
    paths: Vec<Vec<String>>,
    reexports: BTreeMap<String, Vec<String>>,
}

fn scan(module: &ModPath, source: &str) -> Scan {
    let code = code_only(source);
    let mut scan = Scan {
        paths: Vec::new(),
        reexports: BTreeMap::new(),
    };
    // The inline modules (`mod tests { ... }`) around the position, with their brace depth.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < code.len() {
        let word = word_at(&code, i);
        if word.is_empty() || (i > 0 && (is_ident_char(code[i - 1]) || code[i - 1] == ':')) {
            match code[i] {
                '{' => depth += 1,
                '}' => {
                    if inline.last().is_some_and(|&(_, d)| d == depth) {
                        inline.pop();
                    }
                    depth -= 1;
                }
                _ => {}
            }
            i += 1;
            continue;
        }
        let here = || -> ModPath {
            let inline = inline.iter().map(|(m, _)| m.clone());
            module.iter().cloned().chain(inline).collect()
        };
        let after = skip_space(&code, i + word.len());
        if word == "mod" {
            let name = word_at(&code, after);
            let brace = skip_space(&code, after + name.len());
            if code.get(brace) == Some(&'{') {
                inline.push((name, depth + 1));
            }
        } else if word == "use" && inline.is_empty() && is_pub_before(&code, i) {
            let mut found = Vec::new();
            path_tree(&code, after, &[], &mut found);
            for (path, name) in found {
                if let Some(absolute) = absolute(&here(), &path, true) {
                    scan.reexports.insert(name, absolute);
                }
            }
        } else if (word == "crate" || word == "super")
            && code.get(i + word.len()) == Some(&':')
            && code.get(i + word.len() + 1) == Some(&':')
        {
            let mut found = Vec::new();
            let end = path_tree(&code, i, &[], &mut found);
            scan.paths.extend(
                found
                    .into_iter()
                    .filter_map(|(path, _)| absolute(&here(), &path, false)),
            );
            i = end;
            continue;
        }
        i += word.len();
    }
    scan
}

/// Whether the `use` at `code[i]` is a `pub`, `pub(crate)` or `pub(super)` one.
fn is_pub_before(code: &[char], i: usize) -> bool {
    let before: String = code[i.saturating_sub(16)..i].iter().collect();
    let before = before.trim_end();
    before.ends_with("pub")
        || before.rsplit_once("pub(").is_some_and(|(_, scope)| {
            scope
                .strip_suffix(')')
                .is_some_and(|s| s.chars().all(|c| c.is_ascii_lowercase()))
        })
}

/// `path` as seen from module `here`, from the crate root; `None` for another crate's path.
/// Paths not starting with `crate`, `super` or `self` name a child only in a re-export.
fn absolute(here: &ModPath, path: &[String], relative_children: bool) -> Option<Vec<String>> {
    let (first, rest) = path.split_first()?;
    match first.as_str() {
        "crate" => Some(rest.to_vec()),
        "super" | "self" => {
            let mut base = here.clone();
            let mut rest = path;
            while let Some((s, tail)) = rest.split_first() {
                match s.as_str() {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                rest = tail;
            }
            Some(base.into_iter().chain(rest.iter().cloned()).collect())
        }
        _ if relative_children => Some(here.iter().chain(path).cloned().collect()),
        _ => None,
    }
}

struct Graph {
    modules: BTreeSet<ModPath>,
    reexports: BTreeMap<ModPath, BTreeMap<String, Vec<String>>>,
    /// Each module and the modules it names (its descendants left out).
    names: BTreeMap<ModPath, BTreeSet<ModPath>>,
}

impl Graph {
    fn of_src() -> Graph {
        let mut files = Vec::new();
        rust_files(&src_dir(), &mut files);
        let scans: Vec<(ModPath, Scan)> = files
            .iter()
            .map(|file| {
                let module = module_of(file);
                let scan = scan(&module, &fs::read_to_string(file).unwrap());
                (module, scan)
            })
            .collect();
        let mut graph = Graph {
            modules: scans.iter().map(|(m, _)| m.clone()).collect(),
            reexports: BTreeMap::new(),
            names: BTreeMap::new(),
        };
        for (module, scan) in &scans {
            graph
                .reexports
                .insert(module.clone(), scan.reexports.clone());
        }
        for (module, scan) in &scans {
            let named = scan
                .paths
                .iter()
                .map(|path| graph.resolve(path, 0))
                .filter(|to| !to.starts_with(module))
                .collect();
            graph.names.insert(module.clone(), named);
        }
        graph
    }

    /// The module that defines what the absolute `path` names.
    fn resolve(&self, path: &[String], hops: usize) -> ModPath {
        assert!(hops < 16, "re-exports that go round: {}", spelled(path));
        let mut module = ModPath::new();
        for segment in path {
            let child: ModPath = module.iter().chain([segment]).cloned().collect();
            if self.modules.contains(&child) {
                module = child;
            } else if let Some(target) = self.reexports.get(&module).and_then(|r| r.get(segment)) {
                if target.starts_with(&child) {
                    break; // another crate, re-exported under its own name (`pub use pyo3;`)
                }
                return self.resolve(target, hops + 1);
            } else {
                break;
            }
        }
        module
    }

    /// The circles: strongly connected components of more than one module (Tarjan's).
    fn circles(&self) -> Vec<Vec<ModPath>> {
        struct Walk<'g> {
            graph: &'g Graph,
            index: BTreeMap<&'g ModPath, usize>,
            stack: Vec<&'g ModPath>,
            circles: Vec<Vec<ModPath>>,
        }
        impl<'g> Walk<'g> {
            /// Visits `v`; returns the lowest index it reaches on the stack.
            fn visit(&mut self, v: &'g ModPath) -> usize {
                let graph = self.graph;
                let index = self.index.len();
                self.index.insert(v, index);
                self.stack.push(v);
                let mut low = index;
                for w in &graph.names[v] {
                    match self.index.get(w) {
                        None => low = low.min(self.visit(w)),
                        Some(&wi) if self.stack.contains(&w) => low = low.min(wi),
                        Some(_) => {}
                    }
                }
                if low == index {
                    let at = self.stack.iter().position(|m| *m == v).unwrap();
                    let component: Vec<ModPath> = self.stack.drain(at..).cloned().collect();
                    if component.len() > 1 {
                        self.circles.push(component);
                    }
                }
                low
            }
        }
        let mut walk = Walk {
            graph: self,
            index: BTreeMap::new(),
            stack: Vec::new(),
            circles: Vec::new(),
        };
        for module in &self.modules {
            if !walk.index.contains_key(module) {
                walk.visit(module);
            }
        }
        for circle in &mut walk.circles {
            circle.sort();
        }
        walk.circles.sort();
        walk.circles
    }

    /// A circle and the names that close it, one a line.
    fn describe(&self, circle: &[ModPath]) -> String {
        let mut text = circle
            .iter()
            .map(|m| spelled(m))
            .collect::<Vec<_>>()
            .join(", ");
        for from in circle {
            for to in self.names[from].iter().filter(|to| circle.contains(to)) {
                text += &format!("\n    {} names {}", spelled(from), spelled(to));
            }
        }
        text
    }
}

#[test]
fn at_most_one_circle_and_that_one_known() {
    assert!(
        KNOWN_CIRCLES.len() <= 1,
        "the crate may keep one circle at most"
    );
    let graph = Graph::of_src();
    let edges: usize = graph.names.values().map(BTreeSet::len).sum();
    assert!(edges > 150, "the scan found too few names: {edges}");
    let circles = graph.circles();
    let spelled_circles: Vec<Vec<String>> = circles
        .iter()
        .map(|c| c.iter().map(|m| spelled(m)).collect())
        .collect();
    let known: Vec<Vec<String>> = KNOWN_CIRCLES
        .iter()
        .map(|c| c.iter().map(|m| m.to_string()).collect())
        .collect();
    let report = circles
        .iter()
        .map(|c| graph.describe(c))
        .collect::<Vec<_>>()
        .join("\n  ");
    assert!(
        spelled_circles == known,
        "{} circle(s) in the module graph, expected only the known one(s) {known:?}:\n  {report}\n\
         Break a new circle by moving what both sides use to a module below them (often the \
         parent); a known circle that is gone leaves KNOWN_CIRCLES and docs/ARCHITECTURE.md.",
        circles.len()
    );
}

#[test]
fn the_circle_scan_reads_paths_through_literals_inline_modules_and_reexports() {
    let source = r##"
        pub use child::{Thing as Renamed, other::Deep};
        pub(crate) use super::sibling::Shared;
        const TEXT: &str = "{ crate::not::a_path";
        const RAW: &str = r#"} super::nope"#;
        const OPEN: char = '{';
        fn f<'a>(x: &'a str) { crate::dims::Dims::new(); }
        /* crate::in_comment */
        mod tests {
            use super::*;
            fn g() { super::super::up::f(); }
        }
        fn h() { super::after::g(); }
    "##;
    let module: ModPath = vec!["top".into(), "here".into()];
    let scan = scan(&module, source);
    let paths: Vec<String> = scan.paths.iter().map(|p| spelled(p)).collect();
    assert_eq!(
        paths,
        [
            "top::sibling::Shared",
            "dims::Dims::new",
            "top::here::*",
            "top::up::f",
            "top::after::g"
        ]
    );
    let reexports: Vec<(String, String)> = scan
        .reexports
        .iter()
        .map(|(name, path)| (name.clone(), spelled(path)))
        .collect();
    assert_eq!(
        reexports,
        [
            ("Deep".into(), "top::here::child::other::Deep".into()),
            ("Renamed".into(), "top::here::child::Thing".into()),
            ("Shared".into(), "top::sibling::Shared".into()),
        ]
    );
}
