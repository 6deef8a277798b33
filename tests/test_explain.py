"""``dlbridge.explain`` (the Plan) and ``dlbridge.describe`` (what dlbridge sees)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import dlbridge
from dlb_testing import skip_unless_usable
from dlbridge import namespaces as nsmod


def test_plan_fields_and_text():
    pytest.importorskip("torch")  # a plan toward torch is possible only where torch is
    a = np.arange(12.0).reshape(3, 4)[:, ::-1]
    plan = dlbridge.explain(a, "torch")
    assert isinstance(plan, dlbridge.Plan)
    assert plan.possible is True and plan.copies == 1 and plan.error is None
    assert all(isinstance(s, str) for s in plan.steps) and len(plan.steps) >= 2
    assert "negative strides" in plan.reason
    text = str(plan)
    assert "numpy.ndarray float64 (3, 4)" in text and "-> torch" in text and "1 copy" in text
    assert json.loads(json.dumps(plan.as_dict()))["copies"] == 1
    assert not plan.zero_copy


def test_zero_copy_plan():
    plan = dlbridge.explain(np.arange(3.0), "dlbridge")
    assert plan.possible and plan.copies == 0 and plan.zero_copy and "zero-copy" in str(plan)
    assert plan.device == "cpu"


def test_impossible_plan_is_returned_not_raised():
    plan = dlbridge.explain([1, 2], "numpy")
    assert not plan.possible and plan.error == "NoProtocolError" and "list" in plan.reason
    assert "impossible (NoProtocolError)" in str(plan)
    with pytest.raises(AttributeError):  # convert raises it: a TypeError and an AttributeError
        dlbridge.convert([1, 2], "numpy")
    torch = pytest.importorskip("torch")
    plan = dlbridge.explain(torch.ones(2, requires_grad=True), "numpy")
    assert not plan.possible and plan.error == "BufferError" and ".detach()" in plan.reason


def test_explain_does_not_run_anything():
    torch = pytest.importorskip("torch")
    c = torch.tensor([1 + 1j]).conj()
    plan = dlbridge.explain(c, "numpy", resolve=True)
    assert plan.possible and plan.copies == 1
    assert c.is_conj()  # untouched
    cap = np.arange(3.0).__dlpack__(max_version=(1, 0))
    dlbridge.explain(cap, "numpy")
    dlbridge.explain(cap, "numpy")
    assert dlbridge.from_dlpack(cap).tolist() == [0.0, 1.0, 2.0]  # still unconsumed


@pytest.mark.parametrize("copy", [None, True, False])
# one row per registered library; tensorflow last, so that paddle's row runs before it
@pytest.mark.parametrize("to", sorted(nsmod.NAMES, key=lambda name: name == "tensorflow"))
def test_explain_agrees_with_convert(to, copy):
    skip_unless_usable(to)
    readonly = np.arange(6.0)
    readonly.flags.writeable = False
    for x in (np.arange(6.0), np.arange(6.0)[::-1], np.arange(6.0).reshape(2, 3).T, readonly):
        plan = dlbridge.explain(x, to, copy=copy)
        try:
            _, done = dlbridge.convert(x, to, copy=copy, report=True)
        except BufferError:
            assert not plan.possible and plan.error == "BufferError"
            continue
        assert plan.possible and plan.copies == done.copies and plan.steps == done.steps


def test_explain_device_plan():
    dpnp = pytest.importorskip("dpnp")
    try:
        x = dpnp.arange(4, dtype=dpnp.float32)
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"no SYCL device: {exc}")
    plan = dlbridge.explain(x, "numpy")
    assert not plan.possible and "device='cpu'" in plan.reason
    plan = dlbridge.explain(x, "numpy", device="cpu")
    assert plan.possible and plan.copies == 1 and plan.device == "cpu"
    assert any("device-to-host" in s for s in plan.steps)


# ---------------------------------------------------------------------------------- describe

KEYS = {
    "type", "library", "protocols", "capsule", "capsule_version", "device", "device_type",
    "device_id", "dtype", "shape", "strides", "readonly", "c_contiguous", "f_contiguous",
    "aligned", "data_ptr", "state", "errors",
}


def _objects():
    out = [
        np.arange(6.0).reshape(2, 3)[:, ::-1],
        memoryview(b"abc"),
        [1, 2],
        object(),
        dlbridge.Tensor(np.arange(3, dtype=np.int16)),
        np.arange(3.0).__dlpack__(max_version=(1, 0)),
    ]
    for name, make in (
        ("torch", lambda m: m.ones(3, requires_grad=True)),
        ("jax", lambda m: m.numpy.arange(3.0)),
        ("pyarrow", lambda m: m.array([1, None])),
    ):
        if nsmod.get(name).installed():
            mod = __import__(name)
            if name == "jax":
                import jax.numpy  # noqa: F401
            out.append(make(mod))
    return out


@pytest.mark.parametrize("x", _objects(), ids=lambda x: type(x).__name__)
def test_describe_is_json_and_complete(x):
    d = dlbridge.describe(x)
    assert set(d) == KEYS
    assert json.loads(json.dumps(d)) == d


def test_describe_numpy():
    a = np.arange(6.0).reshape(2, 3)[:, ::-1]
    a.flags.writeable = False
    d = dlbridge.describe(a)
    assert d["library"] == "numpy" and d["device"] == "cpu" and d["device_type"] == 1
    assert d["dtype"] == "float64" and d["shape"] == [2, 3] and d["strides"] == [3, -1]
    assert d["readonly"] is True and d["c_contiguous"] is False and d["aligned"] is True
    assert {"__dlpack__", "__dlpack_device__", "buffer", "__array_interface__"} <= set(
        d["protocols"]
    )
    assert d["capsule"]["name"] == "dltensor_versioned" and "READ_ONLY" in d["capsule"]["flags"]
    assert d["capsule_version"].startswith("1.")
    assert d["data_ptr"] == a.__array_interface__["data"][0]


def test_describe_capsule_does_not_consume():
    cap = dlbridge.Tensor(np.arange(4, dtype=np.uint8)).__dlpack__(max_version=(1, 3))
    d = dlbridge.describe(cap)
    assert d["protocols"] == ["capsule"] and d["capsule_version"] == "1.3"
    assert d["dtype"] == "uint8" and d["shape"] == [4] and d["readonly"] is False
    assert dlbridge.from_dlpack(cap).tolist() == [0, 1, 2, 3]
    d = dlbridge.describe(cap)  # now consumed
    assert d["dtype"] is None and "capsule" in d["errors"]


def test_describe_without_protocol():
    d = dlbridge.describe([1, 2])
    assert d["protocols"] == [] and d["dtype"] is None
    assert d["errors"]["import"].startswith("NoProtocolError")


def test_describe_torch_state():
    torch = pytest.importorskip("torch")
    d = dlbridge.describe(torch.ones(3, requires_grad=True))
    assert d["library"] == "torch" and d["dtype"] == "float32"
    assert d["state"][0]["option"] == "detach" and ".detach()" in d["state"][0]["fix"]
    assert d["capsule_version"] == "1.3"
    assert "__cuda_array_interface__" not in d["protocols"]  # a CPU tensor refuses it


def test_describe_jax_says_its_capsule_version():
    pytest.importorskip("jax")
    import jax.numpy as jnp

    x = jnp.arange(3, dtype=jnp.float32)
    capsule = x.__dlpack__(max_version=(1, 3))  # JAX 0.12 speaks 1.3, older JAX legacy only
    spoken = "1.3" if "versioned" in repr(capsule) else "legacy"
    d = dlbridge.describe(x)
    assert d["capsule_version"] == spoken and d["readonly"] is True


def test_describe_arrow_nulls():
    pa = pytest.importorskip("pyarrow")
    d = dlbridge.describe(pa.array([1, None]))
    assert "__arrow_c_array__" in d["protocols"]
    assert "fill_null" in d["errors"]["import"]


def test_describe_device_data():
    dpnp = pytest.importorskip("dpnp")
    try:
        x = dpnp.arange(4, dtype=dpnp.float32)
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"no SYCL device: {exc}")
    d = dlbridge.describe(x)
    assert d["library"] == "dpnp" and d["device"] == "oneapi:0" and d["device_type"] == 14
    t = dlbridge.describe(dlbridge.Tensor(x))
    assert "__array_interface__" in t["errors"] and "__array_interface__" not in t["protocols"]


def test_explain_names_the_pyarrow_routes():
    pa = pytest.importorskip("pyarrow")
    steps = " ".join(dlbridge.explain(pa.array([1.0, 2.0]), "numpy").steps)
    assert "pyarrow's own __dlpack__" in steps
    steps = " ".join(dlbridge.explain(pa.array([True]), "numpy").steps)
    assert "Arrow C interface" in steps
    steps = " ".join(dlbridge.explain(dlbridge.from_dlpack(np.arange(3.0)), "pyarrow").steps)
    assert "__arrow_array__" in steps


def _planner_functions():
    import ast
    from pathlib import Path

    source = Path(dlbridge.plan.__file__).read_text()
    tree = ast.parse(source)
    return tree, [n for n in tree.body if isinstance(n, ast.FunctionDef)]


def test_the_planner_passes_values_not_a_blackboard():
    """Each planning function returns what it found: none returns None (a step that writes
    onto a shared object), and no dataclass of the planner has a field filled in later."""
    import ast

    tree, functions = _planner_functions()
    for f in functions:
        params = [a.annotation for a in f.args.args if a.annotation is not None]
        runs_a_step = any(isinstance(p, ast.Name) and p.id == "Ctx" for p in params)
        if runs_a_step:  # what a route's step does at run time
            continue
        returns = f.returns
        assert returns is not None, f"{f.name} has no return annotation"
        assert not (isinstance(returns, ast.Constant) and returns.value is None), (
            f"{f.name} returns None: a planning step returns what it found"
        )
    later = [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.keyword) and n.arg == "init"
        and isinstance(n.value, ast.Constant) and n.value.value is False
    ]
    assert not later, f"plan.py has dataclass fields filled in later at lines {later}"


def test_convert_and_explain_pass_one_request():
    """The signature is written once: convert's and explain's parameters are the Request's
    fields (and convert's report), build takes the Request alone, and no stub restates
    the package's pure-Python modules."""
    import dataclasses
    import inspect
    from pathlib import Path

    fields = {f.name for f in dataclasses.fields(dlbridge.plan.Request)}
    for f, extra in ((dlbridge.convert, {"report"}), (dlbridge.explain, set())):
        params = set(inspect.signature(f).parameters)
        assert params - extra == fields - {"run"}, f.__name__
    assert list(inspect.signature(dlbridge.plan.build).parameters) == ["request"]
    package = Path(dlbridge.__file__).parent
    assert [p.name for p in package.glob("*.pyi")] == ["_native.pyi"]


def test_the_planner_names_no_library():
    """What a library does is its namespace's to say: the planner compares no name with a
    library's (as it once did with torch's), and words no library's route itself."""
    import ast

    tree, _ = _planner_functions()
    names = set(nsmod.NAMES) - {"dlbridge"}  # dlbridge is the planner's own word
    docstrings = {
        id(n.body[0].value) for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef) and n.body
        and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)
    }
    named = [
        (n.lineno, n.value) for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and n.value in names and id(n) not in docstrings
    ]
    assert not named, f"plan.py names libraries: {named}"
