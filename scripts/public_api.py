#!/usr/bin/env python3
"""The public Rust API of the dlbridge crate, one item a line, from rustdoc's JSON output.

    python3 scripts/public_api.py --check    # build the JSON, diff with docs/rust-public-api.txt
    python3 scripts/public_api.py --update   # build the JSON, rewrite docs/rust-public-api.txt
    python3 scripts/public_api.py [--count] TARGET_DIR/doc/dlbridge.json   # print the list

The JSON comes from nightly rustdoc (its JSON output is unstable):
    RUSTDOCFLAGS="-Z unstable-options --output-format json" \
        cargo +nightly doc -p dlbridge --all-features --no-deps
which --check and --update run themselves; without a nightly toolchain they say so loudly and
succeed, as the other nightly steps of scripts/test.sh do.

The walk starts at the crate root and follows every public item: modules, re-exports (to the
item they name), types with their public fields, variants and inherent associated items,
traits with their items, and the trait implementations of each public type (the auto traits
Send, Sync, Unpin, UnwindSafe and RefUnwindSafe included; blanket implementations left out).
Each line is `KIND PATH` and what code that uses the item relies on: a function's signature
(`unsafe fn dlbridge::Tensor::view_as(&self, dtype: DType) -> Result<Self>`: qualifiers,
generics with their bounds, parameters, return type and where clause), the type of a field,
constant or static, the type an alias names, the generics of a type and the bounds of a
trait. So a changed parameter or return type is a changed line, not only an added or removed
item. Types are spelled by the last segment of their path. Lines are sorted by path.
`--count` prints the number of items (trait implementations not counted) instead.

scripts/test.sh runs --check: a change to the public API is then a change to
docs/rust-public-api.txt (which docs/rust-api.md includes), made on purpose and reviewed.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LISTED = os.path.join(REPO, "docs", "rust-public-api.txt")

KINDS = {
    "module": "mod",
    "function": "fn",
    "struct": "struct",
    "enum": "enum",
    "union": "union",
    "trait": "trait",
    "trait_alias": "trait",
    "type_alias": "type",
    "constant": "const",
    "static": "static",
    "macro": "macro",
    "proc_macro": "macro",
    "struct_field": "field",
    "variant": "variant",
    "assoc_const": "const",
    "assoc_type": "type",
}


# The auto traits a user relies on (other synthetic impls, such as nightly's Freeze, are the
# compiler's business and come and go with its versions).
AUTO_TRAITS = {"Send", "Sync", "Unpin", "UnwindSafe", "RefUnwindSafe"}
# The visibility rustdoc gives a variant's fields: as public as their enum.
VARIANT_FIELD = frozenset({"public", "default"})
# Marker traits derives add for the compiler alone.
COMPILER_MARKERS = {"StructuralPartialEq"}


def kind_of(item: dict) -> str:
    return next(iter(item["inner"])) if isinstance(item["inner"], dict) else item["inner"]


def last(path: str) -> str:
    return path.split("::")[-1]


def render_type(ty) -> str:
    """A short, stable spelling of a rustdoc JSON type: paths by their last segment."""
    if ty is None:
        return "_"
    ((k, v),) = ty.items()
    if k == "resolved_path":
        return last(v["path"]) + render_args(v.get("args"))
    if k in ("primitive", "generic"):
        return v
    if k == "borrowed_ref":
        lifetime = v["lifetime"] + " " if v.get("lifetime") else ""
        return "&" + lifetime + ("mut " if v["is_mutable"] else "") + render_type(v["type"])
    if k == "raw_pointer":
        return "*" + ("mut " if v["is_mutable"] else "const ") + render_type(v["type"])
    if k == "slice":
        return "[" + render_type(v) + "]"
    if k == "array":
        return "[" + render_type(v["type"]) + "; " + str(v["len"]) + "]"
    if k == "tuple":
        return "(" + ", ".join(render_type(t) for t in v) + ("," if len(v) == 1 else "") + ")"
    if k == "qualified_path":
        if v.get("trait") is None or not v["trait"]["path"]:  # `T::Name`, `Self::Name`
            return render_type(v["self_type"]) + "::" + v["name"]
        trait = last(v["trait"]["path"]) + render_args(v["trait"].get("args"))
        return f"<{render_type(v['self_type'])} as {trait}>::{v['name']}"
    if k == "dyn_trait":
        bounds = [render_poly_trait(t) for t in v["traits"]]
        bounds += [v["lifetime"]] if v.get("lifetime") else []
        return "dyn " + " + ".join(bounds)
    if k == "impl_trait":
        return "impl " + render_bounds(v)
    if k == "function_pointer":
        return render_header(v["header"]) + "fn" + render_sig(v["sig"])
    if k == "infer":
        return "_"
    return k


def render_args(args) -> str:
    if not args:
        return ""
    if "parenthesized" in args:
        p = args["parenthesized"]
        out = "(" + ", ".join(render_type(t) for t in p["inputs"]) + ")"
        return out + (" -> " + render_type(p["output"]) if p.get("output") else "")
    if "angle_bracketed" not in args:
        return ""
    parts = []
    for a in args["angle_bracketed"]["args"]:
        if "type" in a:
            parts.append(render_type(a["type"]))
        elif "lifetime" in a:
            parts.append(a["lifetime"])
        elif "const" in a:
            parts.append(str(a["const"].get("expr", "_")))
    for c in args["angle_bracketed"].get("constraints", []):
        binding = c.get("binding", {})
        if "equality" in binding and "type" in binding["equality"]:
            value = render_type(binding["equality"]["type"])
            parts.append(f"{c['name']} = {value}")
        elif "constraint" in binding:
            parts.append(f"{c['name']}: {render_bounds(binding['constraint'])}")
    return "<" + ", ".join(parts) + ">" if parts else ""


def render_poly_trait(t: dict) -> str:
    trait = t["trait"]
    return last(trait["path"]) + render_args(trait.get("args"))


def render_bounds(bounds: list) -> str:
    out = []
    for b in bounds:
        if "trait_bound" in b:
            tb = b["trait_bound"]
            modifier = {"maybe": "?", "maybe_const": "~const "}.get(tb.get("modifier"), "")
            out.append(modifier + render_poly_trait(tb))
        elif "outlives" in b:
            out.append(b["outlives"])
        elif "use" in b:
            out.append("use<..>")
    return " + ".join(out)


def render_generics(generics: dict) -> str:
    """`<'a, T: Bound>` (synthetic `impl Trait` parameters left to the argument's type)."""
    params = []
    for p in generics["params"]:
        ((k, v),) = p["kind"].items()
        if k == "lifetime":
            params.append(p["name"] + (": " + " + ".join(v["outlives"]) if v["outlives"] else ""))
        elif k == "type":
            if v.get("is_synthetic"):
                continue
            bounds = render_bounds(v["bounds"])
            default = " = " + render_type(v["default"]) if v.get("default") else ""
            params.append(p["name"] + (": " + bounds if bounds else "") + default)
        elif k == "const":
            params.append(f"const {p['name']}: {render_type(v['type'])}")
    return "<" + ", ".join(params) + ">" if params else ""


def render_where(generics: dict) -> str:
    preds = []
    for w in generics["where_predicates"]:
        if "bound_predicate" in w:
            b = w["bound_predicate"]
            preds.append(f"{render_type(b['type'])}: {render_bounds(b['bounds'])}")
        elif "lifetime_predicate" in w:
            b = w["lifetime_predicate"]
            preds.append(f"{b['lifetime']}: {' + '.join(b['outlives'])}")
        elif "eq_predicate" in w:
            b = w["eq_predicate"]
            rhs = b["rhs"].get("type")
            preds.append(f"{render_type(b['lhs'])} = {render_type(rhs)}")
    return " where " + ", ".join(preds) if preds else ""


def non_exhaustive(item: dict) -> str:
    """"#[non_exhaustive] " for a type or variant that has the attribute: code outside the
    crate cannot build it or match it without a wildcard, so adding or removing the attribute
    changes what users may write. Older rustdoc JSON writes attributes as source text, newer
    as objects."""
    for attr in item.get("attrs", []):
        if attr == "non_exhaustive" or (
            isinstance(attr, str) and attr.replace(" ", "") == "#[non_exhaustive]"
        ):
            return "#[non_exhaustive] "
        if isinstance(attr, dict) and "non_exhaustive" in attr:
            return "#[non_exhaustive] "
    return ""


def render_header(header: dict) -> str:
    out = "const " if header["is_const"] else ""
    out += "async " if header["is_async"] else ""
    out += "unsafe " if header["is_unsafe"] else ""
    abi = header["abi"]
    if abi != "Rust":
        name = next(iter(abi)) if isinstance(abi, dict) else abi
        out += f'extern "{name}" '
    return out


def render_input(name: str, ty) -> str:
    if name == "self":
        if ty == {"generic": "Self"}:
            return "self"
        ref = ty.get("borrowed_ref")
        if ref is not None and ref["type"] == {"generic": "Self"}:
            lifetime = ref["lifetime"] + " " if ref.get("lifetime") else ""
            return "&" + lifetime + ("mut " if ref["is_mutable"] else "") + "self"
    return f"{name}: {render_type(ty)}"


def render_sig(sig: dict) -> str:
    """`(inputs) -> output`: what a caller passes and gets back."""
    out = "(" + ", ".join(render_input(n, t) for n, t in sig["inputs"]) + ")"
    if sig.get("output") is not None:
        out += " -> " + render_type(sig["output"])
    return out


def render_function(f: dict) -> tuple[str, str]:
    """(the qualifiers before `fn`, the generics, signature and where clause after the path)."""
    detail = render_generics(f["generics"]) + render_sig(f["sig"]) + render_where(f["generics"])
    return render_header(f["header"]), detail


class Walker:
    def __init__(self, doc: dict):
        self.index = doc["index"]
        self.root = doc["root"]
        self.lines: set[tuple[str, str, str]] = set()
        self.seen: set[tuple[int, str]] = set()

    def get(self, id_):
        return None if id_ is None else self.index.get(str(id_))

    def emit(self, kind: str, path: str, detail: str = "") -> None:
        self.lines.add((path, kind, detail))

    def module(self, mod: dict, path: str) -> None:
        for id_ in mod["inner"]["module"]["items"]:
            item = self.get(id_)
            if item is None or item["visibility"] != "public":
                continue
            if kind_of(item) == "use":
                self.reexport(item["inner"]["use"], path)
            else:
                self.item(item, f"{path}::{item['name']}")

    def reexport(self, use: dict, path: str) -> None:
        target = self.get(use["id"])
        if use["is_glob"]:
            if target is not None and kind_of(target) == "module":
                self.module(target, path)
            else:
                self.emit("use", f"{path}::{use['source']}::*")
            return
        if target is None or target.get("crate_id", 0) != 0:
            # another crate's item (or the crate itself), named here
            self.emit("use", f"{path}::{use['name']} = {use['source']}")
            return
        self.item(target, f"{path}::{use['name']}")

    def item(self, item: dict, path: str) -> None:
        key = (item["id"], path)
        if key in self.seen:
            return
        self.seen.add(key)
        kind = kind_of(item)
        inner = item["inner"][kind]
        self.declaration(item, kind, inner, path)
        if kind == "module":
            self.module(item, path)
        elif kind in ("struct", "union"):
            self.fields(inner.get("kind", inner), path)
            self.impls(inner["impls"], path)
        elif kind == "enum":
            for vid in inner["variants"]:
                variant = self.get(vid)
                vpath = f"{path}::{variant['name']}"
                self.emit(non_exhaustive(variant) + "variant", vpath)
                self.fields(variant["inner"]["variant"]["kind"], vpath, VARIANT_FIELD)
            self.impls(inner["impls"], path)
        elif kind == "trait":
            for aid in inner["items"]:
                assoc = self.get(aid)
                akind = kind_of(assoc)
                self.declaration(
                    assoc, akind, assoc["inner"][akind], f"{path}::{assoc['name']}", "trait-"
                )

    def declaration(
        self, item: dict, kind: str, inner: dict, path: str, prefix: str = ""
    ) -> None:
        """One line for an item: its kind, path and what a user's code relies on (a function's
        signature, a constant's or alias's type, a type's generics, a trait's bounds)."""
        name = prefix + KINDS.get(kind, kind)
        if kind == "function":
            qualifiers, detail = render_function(inner)
            self.emit(qualifiers + name, path, detail)
        elif kind in ("constant", "assoc_const", "static"):
            mutable = "mut " if inner.get("is_mutable") else ""
            self.emit(name, path, ": " + mutable + render_type(inner["type"]))
        elif kind == "type_alias":
            generics = render_generics(inner["generics"])
            self.emit(name, path, f"{generics} = {render_type(inner['type'])}")
        elif kind == "assoc_type":
            detail = render_generics(inner["generics"])
            if inner["bounds"]:
                detail += ": " + render_bounds(inner["bounds"])
            if inner.get("type") is not None:
                detail += " = " + render_type(inner["type"])
            self.emit(name, path, detail)
        elif kind in ("struct", "union", "enum"):
            generics = inner["generics"]
            name = non_exhaustive(item) + name
            self.emit(name, path, render_generics(generics) + render_where(generics))
        elif kind == "trait":
            detail = render_generics(inner["generics"])
            if inner["bounds"]:
                detail += ": " + render_bounds(inner["bounds"])
            unsafe = "unsafe " if inner["is_unsafe"] else ""
            self.emit(unsafe + name, path, detail + render_where(inner["generics"]))
        else:
            self.emit(name, path)

    def fields(self, kind, path: str, public: frozenset[str] = frozenset({"public"})) -> None:
        if not isinstance(kind, dict):  # "unit", "plain" (a unit variant)
            return
        ((k, v),) = kind.items()
        if k == "plain":
            ids = v["fields"]
        elif k == "struct":
            ids = v["fields"]
        elif k == "tuple":
            ids = v
        else:
            return
        for i, fid in enumerate(ids):
            field = self.get(fid)
            if field is None or field["visibility"] not in public:
                continue
            name = field["name"] if k != "tuple" else str(i)
            self.emit(
                "field", f"{path}::{name}", ": " + render_type(field["inner"]["struct_field"])
            )

    def impls(self, ids, path: str) -> None:
        for iid in ids:
            impl = self.get(iid)
            if impl is None:
                continue
            data = impl["inner"]["impl"]
            if data["blanket_impl"] is not None:
                continue
            trait = data["trait"]
            if trait is None:
                for aid in data["items"]:
                    assoc = self.get(aid)
                    if assoc is None or assoc["visibility"] != "public":
                        continue
                    akind = kind_of(assoc)
                    self.declaration(
                        assoc, akind, assoc["inner"][akind], f"{path}::{assoc['name']}"
                    )
            else:
                name = last(trait["path"])
                if data["is_synthetic"] and name not in AUTO_TRAITS:
                    continue
                if name in COMPILER_MARKERS:
                    continue
                neg = "!" if data["is_negative"] else ""
                line = f"{path}: {neg}{name}{render_args(trait.get('args'))}"
                for_type = render_type(data["for"])
                if for_type != path.rsplit("::", 1)[-1]:
                    line += f" for {for_type}"
                self.emit("impl", line)


def api_lines(json_path: str) -> list[tuple[str, str, str]]:
    with open(json_path) as f:
        doc = json.load(f)
    walker = Walker(doc)
    root = walker.get(walker.root)
    walker.item(root, root["name"])
    return sorted(walker.lines)


def render(lines: list[tuple[str, str, str]]) -> str:
    out = [
        "# The public API of the dlbridge crate, all features on, as rustdoc sees it on Linux:",
        "# generated by scripts/public_api.py (see there); scripts/test.sh fails when it differs.",
    ]
    out += [f"{kind} {path}{detail}" for path, kind, detail in lines]
    return "\n".join(out) + "\n"


def build_json() -> str | None:
    """Nightly rustdoc's JSON output for dlbridge: the file's path (None without nightly)."""
    cargo = shutil.which("cargo") or "cargo"
    if subprocess.run([cargo, "+nightly", "--version"], capture_output=True).returncode != 0:
        # as scripts/skip_or_fail.sh: skipped locally, a failure under CI=true
        verdict = "FAILED" if os.environ.get("CI") == "true" else "SKIPPED"
        print(
            f"public_api.py: public API check {verdict}: no nightly toolchain "
            "(rustup toolchain install nightly to run it)",
            file=sys.stderr,
        )
        if verdict == "FAILED":
            sys.exit(1)
        return None
    env = dict(os.environ, RUSTDOCFLAGS="-Z unstable-options --output-format json")
    cmd = [cargo, "+nightly", "doc", "-p", "dlbridge", "--all-features", "--no-deps"]
    subprocess.run(cmd, cwd=REPO, env=env, check=True)
    meta = subprocess.run(
        [cargo, "metadata", "--format-version", "1", "--no-deps"],
        cwd=REPO,
        capture_output=True,
        check=True,
        text=True,
    )
    return os.path.join(json.loads(meta.stdout)["target_directory"], "doc", "dlbridge.json")


def main(argv: list[str]) -> int:
    flags = {a for a in argv if a.startswith("--")}
    args = [a for a in argv if not a.startswith("--")]
    if flags & {"--check", "--update"}:
        json_path = build_json()
        if json_path is None:
            return 0
        text = render(api_lines(json_path))
        if "--update" in flags:
            with open(LISTED, "w") as f:
                f.write(text)
            return 0
        with open(LISTED) as f:
            listed = f.read()
        if listed != text:
            sys.stdout.writelines(
                difflib.unified_diff(
                    listed.splitlines(keepends=True),
                    text.splitlines(keepends=True),
                    "docs/rust-public-api.txt",
                    "the crate now",
                )
            )
            print(
                "public_api.py: the public API differs from docs/rust-public-api.txt (above). "
                "If the change is meant: python3 scripts/public_api.py --update, and commit the "
                "list with the change.",
                file=sys.stderr,
            )
            return 1
        return 0
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    lines = api_lines(args[0])
    if "--count" in flags:
        print(sum(1 for _, kind, _ in lines if kind != "impl"))
        return 0
    sys.stdout.write(render(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
