"""The conformance checker (the distribution dlbridge-check, ``checker/``) judges dlbridge, so it
reads dlbridge only through its public surface: the names of ``dlbridge.__all__`` and of the
public data module :mod:`dlbridge.libraries`. Any other import of dlbridge, an attribute of it
whose name starts with an underscore, or a module path to one in a string fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import dlbridge
import dlbridge.libraries

CHECKER = Path(__file__).resolve().parents[1] / "checker" / "src"
#: the dlbridge modules the checker may import, with the names each makes public
PUBLIC = {"dlbridge": set(dlbridge.__all__), "dlbridge.libraries": set(dlbridge.libraries.__all__)}
#: a dotted path into dlbridge in a string (``importlib.import_module("dlbridge._native")``)
PRIVATE_PATH = re.compile(r"\bdlbridge\.(_\w+|(?!libraries\b)[a-z]\w*\.)")


def _sources() -> list[Path]:
    return sorted(CHECKER.rglob("*.py"))


def violations(path: Path) -> list[str]:
    """What ``path`` uses of dlbridge beyond its public surface, one line each."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(CHECKER)}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_dlbridge(alias.name) and alias.name not in PUBLIC:
                    found.append(f"{where}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _is_dlbridge(node.module):
            public = PUBLIC.get(node.module or "")
            for alias in node.names:
                if public is None or alias.name not in public:
                    found.append(f"{where}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Attribute) and _dotted(node.value) in PUBLIC:
            module = _dotted(node.value)
            submodule = f"{module}.{node.attr}"
            if node.attr not in PUBLIC[module] and submodule not in PUBLIC:
                found.append(f"{where}: {module}.{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if PRIVATE_PATH.search(node.value) and not node.value.startswith(("python -m",)):
                found.append(f"{where}: the string {node.value[:60]!r}")
    return found


def _is_dlbridge(module: str | None) -> bool:
    return module is not None and (module == "dlbridge" or module.startswith("dlbridge."))


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def test_the_checker_has_sources_to_read():
    names = {p.name for p in _sources()}
    assert {"__init__.py", "worker.py", "refcapsule.py", "base.py"} <= names


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(CHECKER)))
def test_the_checker_uses_only_dlbridges_public_surface(path):
    assert violations(path) == []


@pytest.mark.parametrize(
    "line",
    [
        "from dlbridge._native import _LEGACY_CAPSULES_WRITABLE",
        "from dlbridge import _native",
        "import dlbridge._layout",
        "from dlbridge.namespaces.torch import Torch",
        "import dlbridge\nx = dlbridge._native",
        "from dlbridge.libraries import _private",
        "import importlib\nimportlib.import_module('dlbridge._discover')",
    ],
)
def test_a_private_use_is_caught(tmp_path, line, monkeypatch):
    """The guard itself: each way into dlbridge's internals is reported."""
    monkeypatch.setattr("test_checker_boundary.CHECKER", tmp_path)
    path = tmp_path / "mod.py"
    path.write_text(line + "\n")
    assert violations(path)


def test_public_uses_pass(tmp_path, monkeypatch):
    monkeypatch.setattr("test_checker_boundary.CHECKER", tmp_path)
    path = tmp_path / "mod.py"
    path.write_text(
        "import dlbridge\nimport dlbridge.libraries\nfrom dlbridge import Device\n"
        "from dlbridge.libraries import library\n"
        "x = dlbridge.from_dlpack, dlbridge.libraries.LEGACY_CAPSULES_WRITABLE\n"
        "usage = 'python -m dlbridge check'\n"
    )
    assert violations(path) == []


def test_the_checker_is_released_with_this_dlbridge():
    """The checker's version is dlbridge's, and it requires exactly that dlbridge: it judges
    the runtime it ships beside."""
    import tomllib

    root = CHECKER.parent.parent
    cargo = tomllib.loads((root / "Cargo.toml").read_text())["workspace"]["package"]["version"]
    project = tomllib.loads((CHECKER.parent / "pyproject.toml").read_text())["project"]
    assert project["version"] == cargo == dlbridge.__version__
    assert f"dlbridge=={cargo}" in project["dependencies"]
