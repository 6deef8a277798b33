"""dlbridge's copy and device rule has one home: ``import::decide`` in Rust.

``from_dlpack``, ``Tensor.copy``, ``Tensor.to_device``, ``Tensor.__dlpack__`` and the planner
of ``convert`` ask it (the planner through ``_native._copy_decision``), and a refusal under
``copy=False`` has the rule's one wording wherever it is raised. These tests fail when one of
them words or decides the rule itself.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

import dlbridge
from dlbridge._native import _copy_decision

ROOT = Path(__file__).resolve().parent.parent
PLAN = ROOT / "python" / "dlbridge" / "plan.py"
TENSOR_RS = ROOT / "crates" / "dlbridge" / "src" / "python" / "module" / "tensor.rs"


def _message(call) -> str:
    with pytest.raises(BufferError) as ei:
        call()
    return str(ei.value)


def test_a_refused_transfer_has_the_rules_words_everywhere():
    a = np.arange(3.0)
    rule = _copy_decision("cpu", "cuda:0", False, False, False)
    assert rule[0] == "refuse transfer" and rule[1] is not None
    assert _message(lambda: dlbridge.convert(a, "dlbridge", device="cuda:0", copy=False)) == rule[1]
    assert _message(lambda: dlbridge.from_dlpack(a, device="cuda:0", copy=False)) == rule[1]
    t = dlbridge.from_dlpack(a)
    assert _message(lambda: t.__dlpack__(dl_device=(2, 0), copy=False)) == rule[1]


@pytest.mark.parametrize(
    ("make", "to"),
    [
        (lambda: np.arange(3.0)[::-1], "torch"),  # a layout the target cannot take
        (lambda: np.arange(6.0).reshape(2, 3).T, "pyarrow"),
        (lambda: _readonly(), "torch"),  # read-only data into a library that cannot keep it
    ],
)
def test_a_refused_copy_in_convert_has_the_rules_words(make, to):
    pytest.importorskip(to)
    why = dlbridge.explain(make(), to).reason  # what needs the copy, as copy=None plans it
    decision, rule = _copy_decision(None, None, False, True, False, why)
    assert decision == "refuse copy"
    assert _message(lambda: dlbridge.convert(make(), to, copy=False)) == rule


def _readonly() -> np.ndarray:
    a = np.arange(3.0)
    a.flags.writeable = False
    return a


def _compares_copy_with_a_bool(node: ast.AST) -> bool:
    if not isinstance(node, ast.Compare):
        return False
    sides = [node.left, *node.comparators]
    named = any(
        (isinstance(s, ast.Name) and s.id == "copy")
        or (isinstance(s, ast.Attribute) and s.attr == "copy")
        for s in sides
    )
    return named and any(isinstance(s, ast.Constant) and isinstance(s.value, bool) for s in sides)


def test_the_planner_decides_and_words_no_copy_rule_itself():
    tree = ast.parse(PLAN.read_text())
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef)
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    compares = [n.lineno for n in ast.walk(tree) if _compares_copy_with_a_bool(n)]
    assert not compares, f"plan.py decides copy= itself at lines {compares}: ask _decided"
    worded = [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant)
        and isinstance(n.value, str)
        and id(n) not in docstrings
        and re.search(r"copy=False|copying is not allowed", n.value)
    ]
    assert not worded, f"plan.py words a copy=False refusal itself at lines {worded}"
    helpers = [
        n.name
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef)
        and any(
            isinstance(c, ast.Call) and getattr(c.func, "id", None) == "_copy_decision"
            for c in ast.walk(n)
        )
    ]
    assert helpers == ["_decided"], f"only _decided reads the rule, not {helpers}"


def _rust_fn(source: str, name: str) -> str:
    """The text of Rust function ``name`` in ``source``, up to the next item at its indent."""
    m = re.search(rf"^( *)(?:pub\(\w+\) )?fn {name}\b", source, re.M)
    assert m, f"no fn {name}"
    end = re.search(rf"^{m.group(1)}}}$", source[m.end():], re.M)
    assert end
    return source[m.start(): m.end() + end.end()]


@pytest.mark.parametrize("name", ["copy", "to_device", "reimported"])
def test_the_tensor_methods_ask_the_rule(name):
    source = TENSOR_RS.read_text()
    assert "exchanged(" in _rust_fn(source, name)
    assert "import::decide(" in _rust_fn(source, "exchanged")
    assert "import::decide(" in _rust_fn(source, "dlpack_as_asked")


def test_the_tensor_class_decides_no_copy_rule_itself():
    source = TENSOR_RS.read_text()
    assert not re.search(r"copy\s*[!=]=\s*Some\(", source)
