"""docs/ARCHITECTURE.md says what the code does: the lint rules pyproject.toml selects,
every crate-private module of the Rust crate's Python layer, and the planner's steps it names."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ARCHITECTURE = REPO / "docs" / "ARCHITECTURE.md"


def test_the_ruff_rules_named_are_the_ones_selected():
    with open(REPO / "pyproject.toml", "rb") as f:
        selected = tomllib.load(f)["tool"]["ruff"]["lint"]["select"]
    match = re.search(r"ruff \(`pyproject.toml`: rules ([^)]*?) at (\d+) columns\)",
                      ARCHITECTURE.read_text())
    assert match, "docs/ARCHITECTURE.md no longer names the ruff rules"
    named = re.split(r",\s*|\s+and\s+", match.group(1))
    assert sorted(named) == sorted(selected)
    with open(REPO / "pyproject.toml", "rb") as f:
        assert int(match.group(2)) == tomllib.load(f)["tool"]["ruff"]["line-length"]


def test_every_crate_private_python_module_is_listed():
    source = (REPO / "crates" / "dlbridge" / "src" / "python" / "mod.rs").read_text()
    private = re.findall(r"^pub\(crate\) mod (\w+);", source, re.MULTILINE)
    assert len(private) > 10, private
    text = ARCHITECTURE.read_text()
    listed = text.split("Crate-private:", 1)[1].split("\n- ", 1)[0]
    missing = [name for name in private if f"`{name}`" not in listed]
    assert not missing, f"docs/ARCHITECTURE.md's crate-private list lacks {missing}"


def test_the_planner_steps_named_are_the_planners():
    text = ARCHITECTURE.read_text()
    paragraph = text.split("`plan.py`: the planner behind both.", 1)[1].split("\n- ", 1)[0]
    named = set(re.findall(r"`(_[A-Za-z_]+)", paragraph))
    assert len(named) > 10, named
    tree = ast.parse((REPO / "python" / "dlbridge" / "plan.py").read_text())
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    imported = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom)
                for a in n.names}
    missing = sorted(named - defined - imported)
    assert not missing, f"docs/ARCHITECTURE.md names planner functions plan.py lacks: {missing}"
