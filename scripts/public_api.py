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
Each line is `KIND PATH`, sorted by path. `--count` prints the number of items (trait
implementations not counted) instead.

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
# Marker traits derives add for the compiler alone.
COMPILER_MARKERS = {"StructuralPartialEq"}


def kind_of(item: dict) -> str:
    return next(iter(item["inner"])) if isinstance(item["inner"], dict) else item["inner"]


def render_type(ty) -> str:
    """A short, stable spelling of a rustdoc JSON type (enough to tell trait impls apart)."""
    if ty is None:
        return "_"
    ((k, v),) = ty.items()
    if k == "resolved_path":
        return v["path"].split("::")[-1] + render_args(v.get("args"))
    if k in ("primitive", "generic"):
        return v
    if k == "borrowed_ref":
        return "&" + ("mut " if v["is_mutable"] else "") + render_type(v["type"])
    if k == "raw_pointer":
        return "*" + ("mut " if v["is_mutable"] else "const ") + render_type(v["type"])
    if k == "slice":
        return "[" + render_type(v) + "]"
    if k == "array":
        return "[" + render_type(v["type"]) + "; " + str(v["len"]) + "]"
    if k == "tuple":
        return "(" + ", ".join(render_type(t) for t in v) + ")"
    if k == "qualified_path":
        return render_type(v["self_type"]) + "::" + v["name"]
    return k


def render_args(args) -> str:
    if not args or "angle_bracketed" not in args:
        return ""
    parts = []
    for a in args["angle_bracketed"]["args"]:
        if "type" in a:
            parts.append(render_type(a["type"]))
        elif "lifetime" in a:
            parts.append(a["lifetime"])
        elif "const" in a:
            parts.append(str(a["const"].get("expr", "_")))
    return "<" + ", ".join(parts) + ">" if parts else ""


class Walker:
    def __init__(self, doc: dict):
        self.index = doc["index"]
        self.root = doc["root"]
        self.lines: set[tuple[str, str]] = set()
        self.seen: set[tuple[int, str]] = set()

    def get(self, id_):
        return None if id_ is None else self.index.get(str(id_))

    def emit(self, kind: str, path: str) -> None:
        self.lines.add((path, kind))

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
        self.emit(KINDS.get(kind, kind), path)
        inner = item["inner"][kind]
        if kind == "module":
            self.module(item, path)
        elif kind in ("struct", "union"):
            self.fields(inner.get("kind", inner), path)
            self.impls(inner["impls"], path)
        elif kind == "enum":
            for vid in inner["variants"]:
                variant = self.get(vid)
                vpath = f"{path}::{variant['name']}"
                self.emit("variant", vpath)
                self.fields(variant["inner"]["variant"]["kind"], vpath)
            self.impls(inner["impls"], path)
        elif kind == "trait":
            for aid in inner["items"]:
                assoc = self.get(aid)
                akind = kind_of(assoc)
                self.emit("trait-" + KINDS.get(akind, akind), f"{path}::{assoc['name']}")

    def fields(self, kind, path: str) -> None:
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
            if field is None or field["visibility"] != "public":
                continue
            name = field["name"] if k != "tuple" else str(i)
            self.emit("field", f"{path}::{name}")

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
                    self.emit(KINDS.get(akind, akind), f"{path}::{assoc['name']}")
            else:
                name = trait["path"].split("::")[-1]
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


def api_lines(json_path: str) -> list[tuple[str, str]]:
    with open(json_path) as f:
        doc = json.load(f)
    walker = Walker(doc)
    root = walker.get(walker.root)
    walker.item(root, root["name"])
    return sorted(walker.lines)


def render(lines: list[tuple[str, str]]) -> str:
    out = [
        "# The public API of the dlbridge crate, all features on, as rustdoc sees it on Linux:",
        "# generated by scripts/public_api.py (see there); scripts/test.sh fails when it differs.",
    ]
    out += [f"{kind} {path}" for path, kind in lines]
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
        print(sum(1 for _, kind in lines if kind != "impl"))
        return 0
    sys.stdout.write(render(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
