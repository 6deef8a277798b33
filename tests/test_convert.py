"""``dlbridge.convert``: path choice, copies, read-only, framework state, devices.

CASES.md rows: C1 C2 C5 C15 C16 C25 C27 C28 C29 C31 C36 C37 C38 C39 C40. The full matrix of
library pairs is in ``interop/test_pairs.py``; this file checks each rule once, with the
expected outcome written out.
"""

from __future__ import annotations

import logging
import mmap
import warnings

import numpy as np
import pytest

import dlbridge
from dlb_testing import make, require_sycl
from dlbridge import namespaces as nsmod
from dlbridge.namespaces.numpy import NumPy

torch = pytest.importorskip("torch")


def ptr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def aligned(shape, dtype="float64", shift=0) -> np.ndarray:
    """A C-contiguous array whose first byte is ``shift`` bytes past a 64-byte boundary."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape)) * dt.itemsize
    raw = np.zeros(n + 64 + shift, np.uint8)
    start = (-ptr(raw)) % 64 + shift
    out = raw[start:start + n].view(dt).reshape(shape)
    out[...] = make(dt, shape)
    return out


# ---------------------------------------------------------------------------------- arguments


@pytest.mark.parametrize("to", ["torch", torch, "numpy", np, "np", "dlbridge", dlbridge])
def test_target_by_module_or_name(to):
    y = dlbridge.convert(np.arange(3.0), to)
    assert list(np.asarray(dlbridge.to_numpy(y))) == [0.0, 1.0, 2.0]


def test_jax_numpy_module_is_jax(x64):
    import jax.numpy as jnp

    assert isinstance(dlbridge.convert(np.arange(3.0), jnp), x64.Array)


@pytest.mark.parametrize(
    "kw", [{"device": "bogus"}, {"device": (0, 0)}, {"copy": 1}, {"copy": "yes"}]
)
def test_bad_arguments_are_value_errors(kw):
    with pytest.raises(ValueError):
        dlbridge.convert(np.arange(3.0), "numpy", **kw)
    with pytest.raises(ValueError):
        dlbridge.explain(np.arange(3.0), "numpy", **kw)


def test_unknown_target():
    with pytest.raises(ValueError, match="unknown target"):
        dlbridge.convert(np.arange(3.0), "matlab")


def test_target_not_installed_is_import_error(monkeypatch):
    # Every target library is installed here: one is made to look absent, as find_spec
    # reports it on a machine without it.
    target = nsmod.get("tensorflow")
    monkeypatch.setattr(target, "installed", lambda: False)
    with pytest.raises(ImportError, match="pip install tensorflow"):
        dlbridge.convert(np.arange(3.0), "tensorflow")


def test_no_protocol_is_type_error():  # C46
    with pytest.raises(TypeError, match="list"):
        dlbridge.convert([1, 2, 3], "torch")


# ---------------------------------------------------------------------------------- identity, copy


def test_already_there_is_returned_as_is():
    a = np.arange(4.0)
    assert dlbridge.convert(a, np) is a
    t = torch.arange(3.0, requires_grad=True)
    assert dlbridge.convert(t, "torch") is t  # torch to torch keeps autograd


def test_copy_true_is_independent_and_writable():
    a = np.arange(6.0).reshape(2, 3)
    a.flags.writeable = False
    y, plan = dlbridge.convert(a, np, copy=True, report=True)
    assert plan.copies == 1 and ptr(y) != ptr(a)
    assert y.flags.writeable and y.flags.c_contiguous
    np.testing.assert_array_equal(y, a)


def test_zero_copy_when_possible():
    a = np.arange(12.0).reshape(3, 4)
    y, plan = dlbridge.convert(a.T, "torch", copy=False, report=True)
    assert plan.copies == 0 and y.data_ptr() == ptr(a)
    assert tuple(y.stride()) == (1, 4)


def test_report_plan_matches_explain():
    a = np.arange(12.0).reshape(3, 4)[:, ::-1]
    plan = dlbridge.explain(a, "torch")
    _, done = dlbridge.convert(a, "torch", report=True)
    assert (plan.possible, plan.copies, plan.steps) == (done.possible, done.copies, done.steps)


# ---------------------------------------------------------------------------------- layouts


def test_c1_negative_strides_into_torch():  # C1
    a = np.arange(12.0).reshape(3, 4)[:, ::-1]
    assert a.strides == (32, -8)
    y, plan = dlbridge.convert(a, "torch", report=True)
    assert plan.copies == 1 and "negative strides" in plan.reason
    np.testing.assert_array_equal(y.numpy(), a)
    with pytest.raises(BufferError, match="copy=False"):
        dlbridge.convert(a, "torch", copy=False)


def test_c2_flip_into_compact_only_consumer(x64):  # C2 (JAX takes compact strides only)
    a = np.arange(10, dtype=np.int32)[::-1]
    y, plan = dlbridge.convert(a, "jax", report=True)
    assert plan.copies == 1 and "compact" in plan.reason
    np.testing.assert_array_equal(np.asarray(y), a)
    with pytest.raises(BufferError):
        dlbridge.convert(a, "jax", copy=False)


def test_c5_size1_dims_then_reduce(x64):  # C5
    import jax.numpy as jnp

    t = torch.arange(36, dtype=torch.float32).reshape(3, 1, 6, 2)
    y = dlbridge.convert(t, "jax")
    assert float(jnp.sum(y)) == float(t.sum())
    np.testing.assert_array_equal(np.asarray(jnp.sum(y, axis=2)), t.sum(dim=2).numpy())


def test_c40_jax_alignment(x64, caplog, capfd):  # C40
    a = aligned((3, 4), shift=8)  # element-aligned, not 64-byte aligned
    with pytest.raises(BufferError, match="64-byte"):  # JAX itself raises ValueError here
        dlbridge.convert(a, "jax", copy=False)
    with caplog.at_level(logging.DEBUG):
        y, plan = dlbridge.convert(a, "jax", report=True)
    assert plan.copies == 1
    np.testing.assert_array_equal(np.asarray(y), a)
    assert y.unsafe_buffer_pointer() % 64 == 0
    assert not [r for r in caplog.records if "dlbridge" in r.name or "align" in r.getMessage()]
    out, err = capfd.readouterr()
    assert "align" not in out + err
    b = aligned((3, 4), shift=0)
    y = dlbridge.convert(b, "jax", copy=False)
    assert y.unsafe_buffer_pointer() == ptr(b)


def test_c40_item_misaligned_is_realigned():  # C40
    raw = np.zeros(8 * 5 + 1, np.uint8)
    a = raw[1:].view(np.int64)
    a[...] = np.arange(5)
    with pytest.raises(BufferError):
        dlbridge.convert(a, "torch", copy=False)
    y, plan = dlbridge.convert(a, "torch", report=True)
    assert plan.copies == 1 and y.tolist() == list(range(5))


def test_pyarrow_layouts():
    pa = pytest.importorskip("pyarrow")
    a = np.arange(12.0).reshape(3, 4)
    y, plan = dlbridge.convert(a, "pyarrow", report=True)
    assert isinstance(y, pa.FixedShapeTensorArray) and plan.copies == 0
    y, plan = dlbridge.convert(a[:, 1:], "pyarrow", report=True)  # gapped rows
    assert plan.copies == 1
    np.testing.assert_array_equal(y.to_numpy_ndarray(), a[:, 1:])
    with pytest.raises(BufferError, match="0-d"):
        dlbridge.convert(np.array(1.0), "pyarrow")
    with pytest.raises(BufferError, match="complex"):
        dlbridge.convert(np.ones(3, np.complex64), "pyarrow")


# ---------------------------------------------------------------------------------- read-only


def test_c15_jax_into_torch_is_copied(x64):  # C15
    import jax.numpy as jnp

    j = jnp.arange(6.0)
    y, plan = dlbridge.convert(j, "torch", report=True)
    assert plan.copies == 1 and "read-only" in plan.reason
    y[0] = 100.0
    assert float(j[0]) == 0.0  # the JAX buffer was not touched
    with pytest.raises(BufferError, match="read-only"):
        dlbridge.convert(j, "torch", copy=False)


def test_c16_readonly_numpy_into_torch():  # C16
    a = np.arange(4.0)
    a.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no UserWarning from torch either
        y, plan = dlbridge.convert(a, "torch", report=True)
    assert plan.copies == 1 and y.data_ptr() != ptr(a)
    y[0] = 7.0
    assert a[0] == 0.0
    with pytest.raises(BufferError, match="copy=False"):
        dlbridge.convert(a, "torch", copy=False)


def test_readonly_mmap_into_torch(tmp_npy):
    m = np.load(tmp_npy, mmap_mode="r")
    y, plan = dlbridge.convert(m, "torch", report=True)
    assert plan.copies == 1
    np.testing.assert_array_equal(y.numpy(), m)


def test_readonly_mmap_buffer_into_numpy_stays_readonly(tmp_path):
    path = tmp_path / "raw.bin"
    path.write_bytes(np.arange(8, dtype=np.int32).tobytes())
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    y = dlbridge.convert(mm, "numpy", copy=False)
    assert not y.flags.writeable
    assert bytes(y) == path.read_bytes()
    del y
    mm.close()


def test_readonly_into_readonly_capable_targets_is_zero_copy():
    pa = pytest.importorskip("pyarrow")
    a = np.arange(6.0)
    a.flags.writeable = False
    y = dlbridge.convert(dlbridge.Tensor(a), "numpy", copy=False)
    assert ptr(y) == ptr(a) and not y.flags.writeable
    if nsmod.get("array_api_strict").installed():
        z = dlbridge.convert(a, "array_api_strict", copy=False)
        assert not z._array.flags.writeable
    arr = pa.array([1.0, 2.0])
    y = dlbridge.convert(arr, "numpy", copy=False)
    assert not y.flags.writeable


def jax_asks_versioned() -> bool:
    """JAX 0.12's from_dlpack asks for versioned capsules; older JAX for legacy ones."""
    asked = nsmod.get("jax").asks_for
    return asked is not None and asked >= (1, 1)


def test_readonly_into_jax(x64):
    a = aligned((4,))
    a.flags.writeable = False
    y, plan = dlbridge.convert(a, "jax", report=True)
    assert np.asarray(y).tolist() == a.tolist()
    if jax_asks_versioned():  # the READ_ONLY flag travels, and JAX arrays are immutable
        assert plan.copies == 0
        assert dlbridge.convert(a, "jax", copy=False).tolist() == a.tolist()
        return
    assert plan.copies == 1 and "legacy" in plan.reason
    with pytest.raises(BufferError):
        dlbridge.convert(a, "jax", copy=False)


def test_writable_into_immutable_target_notes_the_alias(x64):
    a = aligned((4,))
    y, plan = dlbridge.convert(a, "jax", report=True)
    assert plan.copies == 0 and plan.notes and "immutable" in plan.notes[0]


# ---------------------------------------------------------------------------------- dtypes


def test_c25_bfloat16_into_numpy_uses_ml_dtypes():  # C25
    pytest.importorskip("ml_dtypes")
    t = torch.arange(6).to(torch.bfloat16).reshape(2, 3)
    y, plan = dlbridge.convert(t, "numpy", report=True)
    assert y.dtype.name == "bfloat16" and plan.copies == 0
    assert ptr(y) == t.data_ptr()
    np.testing.assert_array_equal(y.astype(np.float32), t.float().numpy())
    back = dlbridge.convert(y, "torch", copy=False)  # NumPy ml_dtypes arrays go back zero-copy
    assert back.data_ptr() == t.data_ptr() and back.dtype == torch.bfloat16


def test_c25_bfloat16_without_ml_dtypes(monkeypatch):  # C25
    monkeypatch.setattr(nsmod.numpy, "has_ml_dtypes", lambda: False)
    t = torch.arange(3).to(torch.bfloat16)
    with pytest.raises(BufferError, match="ml_dtypes"):
        dlbridge.convert(t, "numpy")


@pytest.mark.parametrize("to", ["array_api_strict", "pyarrow"])
def test_c25_bfloat16_refused_cleanly(to):
    if not nsmod.get(to).installed():
        pytest.skip(f"{to} not installed")
    with pytest.raises(BufferError, match="bfloat16"):
        dlbridge.convert(torch.ones(3, dtype=torch.bfloat16), to)


def test_float8_into_torch_and_jax(x64):
    t = torch.arange(6).to(torch.float8_e4m3fn)
    tensor = dlbridge.Tensor(t)
    y, plan = dlbridge.convert(tensor, "torch", report=True)
    assert plan.copies == 0 and y.dtype == torch.float8_e4m3fn and y.data_ptr() == t.data_ptr()
    j, plan = dlbridge.convert(t, "jax", report=True)
    assert str(j.dtype) == "float8_e4m3fn"
    np.testing.assert_array_equal(np.asarray(j).astype(np.float32), t.float().numpy())
    if jax_asks_versioned():  # JAX 0.12 takes float8 in a DLPack 1.1+ capsule
        assert plan.copies == 0
        return
    assert plan.copies == 1  # older JAX asks for legacy capsules, which predate float8
    with pytest.raises(BufferError):
        dlbridge.convert(t, "jax", copy=False)


class NoUnsigned(NumPy):
    """A consumer without unsigned integers (TensorFlow before 2.x, old torch)."""

    name = "no-unsigned"

    def dtype_route(self, dtype):
        if dtype.startswith("uint"):
            return f"refuse: this consumer has no {dtype}; cast to a signed type first"
        return super().dtype_route(dtype)


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "uint64"])
def test_c27_unsigned(dtype):  # C27
    a = np.array([0, 1, np.iinfo(dtype).max], dtype=dtype)
    with pytest.raises(BufferError, match=dtype):
        dlbridge.convert(a, NoUnsigned())
    y = dlbridge.convert(a, "torch")  # torch has them: no wrap to signed
    assert str(y.dtype) == f"torch.{dtype}"
    assert dlbridge.to_numpy(y).tolist() == a.tolist()


def test_jax_without_x64_refuses_64_bit():
    jax = pytest.importorskip("jax")
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", False)
    try:
        with pytest.raises(BufferError, match="jax_enable_x64"):
            dlbridge.convert(np.arange(3.0), "jax")
        y = dlbridge.convert(np.arange(3, dtype=np.float32), "jax")
        assert str(y.dtype) == "float32"
    finally:
        jax.config.update("jax_enable_x64", old)


# ---------------------------------------------------------------------------------- torch state


def test_c29_requires_grad():  # C29
    t = torch.arange(4.0, requires_grad=True)
    with pytest.raises(BufferError, match=r"\.detach\(\)"):
        dlbridge.convert(t, "numpy")
    plan = dlbridge.explain(t, "numpy")
    assert not plan.possible and "detach=True" in plan.reason
    y, plan = dlbridge.convert(t, "numpy", detach=True, copy=False, report=True)
    assert plan.copies == 0 and ptr(y) == t.data_ptr()


def test_c28_conjugate_bit():  # C28
    base = torch.tensor([1 + 2j, 3 - 1j])
    c = base.conj()
    assert c.is_conj()
    with pytest.raises(BufferError, match=r"resolve_conj"):
        dlbridge.convert(c, "numpy")
    with pytest.raises(BufferError, match="copy=False"):
        dlbridge.convert(c, "numpy", resolve=True, copy=False)
    y, plan = dlbridge.convert(c, "numpy", resolve=True, report=True)
    assert plan.copies == 1
    np.testing.assert_array_equal(y, np.array([1 - 2j, 3 + 1j]))


def test_negative_bit():
    n = torch.tensor([1 + 2j, 3 - 1j]).conj().imag
    assert n.is_neg()
    with pytest.raises(BufferError, match=r"resolve_neg"):
        dlbridge.convert(n, "numpy")
    y = dlbridge.convert(n, "numpy", resolve=True)
    np.testing.assert_array_equal(y, np.array([-2.0, 1.0]))


def test_jax_computation_result(x64):
    import jax.numpy as jnp

    x = jnp.arange(1000.0) * 2.0 + 1.0  # may still be computing: waited for
    np.testing.assert_array_equal(dlbridge.convert(x, "numpy"), np.arange(1000.0) * 2 + 1)


def test_c31_tensorflow():  # C31
    tf = pytest.importorskip("tensorflow")
    with tf.device("/GPU:0" if tf.config.list_logical_devices("GPU") else "/CPU:0"):
        x = tf.constant([1, 2, 3], dtype=tf.int32)
    y = dlbridge.convert(x, "numpy")
    assert y.tolist() == [1, 2, 3]
    assert dlbridge.describe(x)["device"] == "cpu"  # int32 lives in host memory


# ---------------------------------------------------------------------------------- devices


def test_c36_device_data_into_cpu_target_needs_device():  # C36
    dpnp = require_sycl()
    x = dpnp.arange(6, dtype=dpnp.float32)
    with pytest.raises(BufferError, match="device='cpu'"):
        dlbridge.convert(x, "numpy")


def test_c37_device_to_host():  # C37
    dpnp = require_sycl()
    x = dpnp.reshape(dpnp.arange(12, dtype=dpnp.float32), (3, 4))
    y, plan = dlbridge.convert(x, np, device="cpu", report=True)
    assert plan.copies == 1 and y.flags.writeable
    np.testing.assert_array_equal(y, np.arange(12, dtype=np.float32).reshape(3, 4))
    t = dlbridge.convert(x, "dlbridge", device="cpu")
    assert t.device == "cpu" and t.is_copied


def test_c38_host_to_device_by_the_consumer():  # C38
    dpnp = require_sycl()

    class Spy:
        def __init__(self, inner):
            self.inner, self.calls = inner, []

        def __dlpack__(self, **kw):
            self.calls.append(kw)
            return self.inner.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.inner.__dlpack_device__()

    spy = Spy(np.arange(5.0))
    y, plan = dlbridge.convert(spy, "dpnp", device="oneapi:0", report=True)
    assert plan.copies == 1
    assert y.__dlpack_device__()[0] == 14
    np.testing.assert_array_equal(dpnp.asnumpy(y), np.arange(5.0))
    assert all(kw.get("dl_device") in (None, (1, 0)) for kw in spy.calls)


def test_c39_copy_false_across_devices():  # C39
    dpnp = require_sycl()
    x = dpnp.arange(4, dtype=dpnp.float32)
    with pytest.raises(BufferError, match="copy=False"):
        dlbridge.convert(x, np, device="cpu", copy=False)
    with pytest.raises(BufferError, match="copy=False"):
        dlbridge.convert(np.arange(4.0), "dpnp", device="oneapi:0", copy=False)


def test_device_object_arguments():
    dpnp = require_sycl()
    dev = dpnp.arange(1).sycl_device
    y = dlbridge.convert(np.arange(3.0), "dpnp", device=dev)
    np.testing.assert_array_equal(dpnp.asnumpy(y), np.arange(3.0))
    z = dlbridge.convert(y, "torch", device=torch.device("cpu"))
    assert z.tolist() == [0.0, 1.0, 2.0]


def test_oneapi_tensor_to_host_through_dpnp():
    dpnp = require_sycl()
    t = dlbridge.Tensor(dpnp.arange(4, dtype=dpnp.int32))
    assert t.device == "oneapi:0"
    y, plan = dlbridge.convert(t, "numpy", device="cpu", report=True)
    assert "dpnp" in plan.steps[0] and y.tolist() == [0, 1, 2, 3]


def test_device_passthrough_and_copy_on_device():
    dpnp = require_sycl()
    x = dpnp.arange(4, dtype=dpnp.float32)
    t, plan = dlbridge.convert(x, "dlbridge", report=True)
    assert t.device == "oneapi:0" and plan.copies == 0
    y, plan = dlbridge.convert(x, "dpnp", copy=True, report=True)
    assert plan.copies == 1 and dlbridge.Tensor(y).data_ptr != t.data_ptr
    ro = dpnp.arange(4, dtype=dpnp.float32)
    ro.get_array().flags.writable = False
    if nsmod.get("tvm_ffi").installed():  # tvm_ffi cannot mark read-only: a copy on the device
        z, plan = dlbridge.convert(ro, "tvm_ffi", report=True)
        assert plan.copies == 1 and z.data_ptr() != dlbridge.Tensor(ro).data_ptr


def test_arrow_nulls_are_refused_with_the_fix():
    pa = pytest.importorskip("pyarrow")
    with pytest.raises(BufferError, match="fill_null"):
        dlbridge.convert(pa.array([1.0, None]), "torch")


def test_capsule_source_is_consumed_once():
    cap = dlbridge.Tensor(np.arange(3.0)).__dlpack__(max_version=(1, 3))
    plan = dlbridge.explain(cap, "torch")  # reads, does not consume
    assert plan.possible and plan.copies == 0
    y = dlbridge.convert(cap, "torch")
    assert y.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(BufferError):
        dlbridge.convert(cap, "torch")  # C18: consumed


def test_torch_tensors_without_strided_memory():
    s = torch.eye(3).to_sparse()
    with pytest.raises(BufferError, match=r"to_dense\(\)"):
        dlbridge.convert(s, "numpy")
    m = torch.empty(3, device="meta")
    plan = dlbridge.explain(m, "numpy")
    assert not plan.possible and "meta" in plan.reason
    assert "layout" in dlbridge.describe(m)["errors"]


def test_convert_reads_a_stream_only_producer_once():
    pa = pytest.importorskip("pyarrow")
    chunked = pa.chunked_array([np.arange(3.0), np.arange(3.0, 5.0)])

    class OneShot:  # a RecordBatchReader-like producer: its stream can be read once
        reads = 0

        def __arrow_c_stream__(self, requested_schema=None):
            OneShot.reads += 1
            if OneShot.reads > 1:
                raise RuntimeError("this stream was already read")
            return chunked.__arrow_c_stream__(requested_schema)

    out, plan = dlbridge.convert(OneShot(), "numpy", report=True)
    np.testing.assert_array_equal(out, np.arange(5.0))
    assert OneShot.reads == 1 and plan.copies == 1
    OneShot.reads = 0
    with pytest.raises(BufferError):
        dlbridge.convert(OneShot(), "numpy", copy=False)
    assert OneShot.reads == 1


def test_install_hints_name_what_the_project_installs():
    # convert's "not installed (pip install ...)" names a namespace's pip spec: it must be the
    # one requirements-test.txt installs (cupy-cuda13x, not cupy-cuda12x: torch's wheel brings
    # the CUDA 13 runtime); the checker's adapters take theirs from the namespace
    from pathlib import Path

    requirements = Path(__file__).parents[1] / "requirements-test.txt"
    lines = {ln.strip() for ln in requirements.read_text().splitlines()}
    for name in (n for n in nsmod.NAMES if n != "dlbridge"):
        for spec in nsmod.get(name).pip.split():
            assert spec in lines, f"{name}: {spec} is not in requirements-test.txt"
    assert nsmod.get("cupy").pip == "cupy-cuda13x"


def test_convert_docs_name_every_library():
    # the registry is the one list of targets: convert's docstring ends with every registered
    # library and the modules that stand for it; the docstring read without importing dlbridge
    # (its source, which the API reference reads) points to that list
    import ast
    from pathlib import Path

    doc = dlbridge.convert.__doc__
    for name in nsmod.NAMES:
        ns = nsmod.get(name)
        missing = [m for m in (name, ns.module, *ns.modules) if f"``{m}``" not in doc]
        assert not missing, (name, missing)
    package = Path(dlbridge.__file__).parent
    source = ast.parse((package / "convert.py").read_text())
    source_doc = next(
        ast.get_docstring(f)
        for f in source.body
        if isinstance(f, ast.FunctionDef) and f.name == "convert" and ast.get_docstring(f)
    )
    assert "``dlbridge.namespaces.NAMES``" in source_doc
    assert "Targets:" not in source_doc  # the list itself is made from the registry


def test_the_package_signature_is_written_once():
    # convert's and explain's signatures live in convert.py alone: no stub restates the
    # package's pure-Python modules (mypy, stubtest and the API reference read them as they are)
    from pathlib import Path

    package = Path(dlbridge.__file__).parent
    assert sorted(p.name for p in package.glob("*.pyi")) == ["_native.pyi"]
