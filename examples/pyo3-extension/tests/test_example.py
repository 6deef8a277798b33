"""The example extension `dlbridge_example` with real peer libraries.

Run by ``scripts/examples.sh``, which builds the extension and puts it on ``PYTHONPATH``.
Every function takes its argument as a ``dlbridge::Tensor``: the arrays of each library go in
without a copy (the Tensor's ``data_ptr`` is the source's address), results go out without
one, and bad input is refused with the exception dlbridge's Python package raises for it.
"""

from __future__ import annotations

import ast
import gc
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import dlbridge_example as ex

VALUES = [0.5, 1.0, 2.0, 4.0, 8.0]
TOTAL = sum(VALUES)


def numpy_source():
    a = np.array(VALUES, dtype=np.float32)
    return a, a.ctypes.data


def torch_source():
    torch = pytest.importorskip("torch")
    t = torch.tensor(VALUES, dtype=torch.float32)
    return t, t.data_ptr()


def jax_source():
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.array(VALUES, dtype=jnp.float32)
    return x, x.unsafe_buffer_pointer()


def pyarrow_source():
    pa = pytest.importorskip("pyarrow")
    arr = pa.array(VALUES, type=pa.float32())
    return arr, arr.buffers()[1].address


def pyarrow_chunked_source():
    pa = pytest.importorskip("pyarrow")
    arr = pa.chunked_array([pa.array(VALUES, type=pa.float32())])
    return arr, arr.chunk(0).buffers()[1].address


def polars_source():
    pl = pytest.importorskip("polars")
    s = pl.Series("x", VALUES, dtype=pl.Float32)
    return s, s.to_arrow().buffers()[1].address


def dpnp_array():
    """A float32 dpnp array in SYCL device memory, or a skip."""
    dpnp = pytest.importorskip("dpnp")
    try:
        return dpnp.asarray(VALUES, dtype=dpnp.float32)
    except Exception as exc:  # noqa: BLE001 - no SYCL device here
        pytest.skip(f"dpnp has no device: {exc}")


SOURCES = {
    "numpy": numpy_source,
    "torch": torch_source,
    "jax": jax_source,
    "pyarrow": pyarrow_source,
    "pyarrow-chunked": pyarrow_chunked_source,
    "polars": polars_source,
}


@pytest.mark.parametrize("make", SOURCES.values(), ids=SOURCES.keys())
def test_total_takes_every_library(make):
    source, _ = make()
    assert ex.total(source) == TOTAL


@pytest.mark.parametrize("make", SOURCES.values(), ids=SOURCES.keys())
def test_passthrough_views_the_source_memory(make):
    source, address = make()
    t = ex.passthrough(source)
    assert t.data_ptr == address
    assert t.shape == (len(VALUES),)
    assert np.from_dlpack(t).ctypes.data == address
    assert np.from_dlpack(t).tolist() == VALUES


def test_passthrough_keeps_the_source_alive():
    t = ex.passthrough(np.array(VALUES, dtype=np.float32))
    gc.collect()  # the array is referenced only by the Tensor now
    assert np.from_dlpack(t).tolist() == VALUES


def test_a_read_only_source_stays_read_only():
    a = np.array(VALUES, dtype=np.float32)
    a.flags.writeable = False
    t = ex.passthrough(a)
    assert t.readonly
    assert not np.from_dlpack(t).flags.writeable


def test_ramp_is_taken_zero_copy_by_every_consumer():
    r = ex.ramp(6)
    assert r.shape == (6,)
    assert np.from_dlpack(r).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert np.from_dlpack(r).ctypes.data == r.data_ptr
    torch = pytest.importorskip("torch")
    assert torch.from_dlpack(r).data_ptr() == r.data_ptr
    pa = pytest.importorskip("pyarrow")
    assert pa.array(r).buffers()[1].address == r.data_ptr


def test_jax_takes_ramp():
    # XLA imports host memory zero-copy only when it is aligned to 64 bytes; a Rust Vec<f32>
    # is aligned to 16 at most, so JAX copies it. The values must be right either way.
    jnp = pytest.importorskip("jax.numpy")
    r = ex.ramp(4)
    assert jnp.from_dlpack(r).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_ramp_of_nothing_is_empty():
    assert np.from_dlpack(ex.ramp(0)).shape == (0,)


def test_the_result_outlives_the_call_and_its_consumers():
    r = ex.ramp(3)
    a = np.from_dlpack(r)
    del r
    gc.collect()  # numpy's array now holds the Rust memory alone
    assert a.tolist() == [0.0, 1.0, 2.0]


def test_total_numpy_is_the_numpy_only_baseline():
    a, _ = numpy_source()
    assert ex.total_numpy(a) == TOTAL
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError):
        ex.total_numpy(torch.tensor(VALUES))


@pytest.mark.parametrize("bad", [[1.0, 2.0], 3.0, None, "abc"], ids=["list", "float", "None", "str"])
def test_what_is_not_an_array_is_a_type_error(bad):
    with pytest.raises(TypeError, match="cannot import an object of type"):
        ex.total(bad)


def test_a_different_dtype_is_a_type_error_naming_both_and_the_fix():
    x = np.arange(3, dtype=np.int64)
    with pytest.raises(TypeError, match="int64.*float32") as info:
        ex.total(x)
    assert 'x.astype("float32")' in str(info.value)
    assert ex.total(x.astype("float32")) == 3.0  # the way out it names


def test_strided_data_is_a_buffer_error_naming_the_real_problem():
    x = np.arange(8, dtype=np.float32)[::2]
    with pytest.raises(BufferError, match="not C-contiguous") as info:
        ex.total(x)
    # the caller passed no copy=..., so the message does not talk about copy=False
    assert "copy=False" not in str(info.value)
    assert "numpy.ascontiguousarray" in str(info.value)
    assert ex.total(np.ascontiguousarray(x)) == float(x.sum())  # the way out it names


def test_device_memory_is_a_buffer_error_naming_device_cpu():
    x = dpnp_array()
    with pytest.raises(BufferError, match='device="cpu"'):
        ex.total(x)
    # the Tensor itself keeps the device memory zero-copy; only host reads are refused
    assert str(ex.passthrough(x).device) == "oneapi:0"


def test_host_total_takes_any_strides():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert ex.host_total(a[:, ::-2]) == float(a[:, ::-2].sum())
    assert ex.host_total(a.T) == float(a.sum())
    torch = pytest.importorskip("torch")
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    assert ex.host_total(t.t()) == float(t.sum())


def test_host_total_copies_device_memory_to_the_host():
    assert ex.host_total(dpnp_array()) == TOTAL


def test_copy_false_refuses_device_memory():
    x = dpnp_array()
    with pytest.raises(BufferError):
        ex.total_with(x, copy=False)
    assert ex.total_with(x) == TOTAL
    assert ex.total_with(np.array(VALUES, dtype=np.float32), copy=False) == TOTAL


def test_scale_writes_numpy_and_torch_arrays_in_place():
    a = np.array(VALUES, dtype=np.float32)
    ex.scale(a, 2.0)
    assert a.tolist() == [2 * v for v in VALUES]
    torch = pytest.importorskip("torch")
    t = torch.tensor(VALUES, dtype=torch.float32)
    ex.scale(t, -1.0)
    assert t.tolist() == [-v for v in VALUES]


def test_scale_refuses_read_only_data():
    a = np.array(VALUES, dtype=np.float32)
    a.flags.writeable = False
    with pytest.raises(BufferError, match="read-only"):
        ex.scale(a, 2.0)
    assert a.tolist() == VALUES
    pa = pytest.importorskip("pyarrow")
    with pytest.raises(BufferError):
        ex.scale(pa.array(VALUES, type=pa.float32()), 2.0)


def test_scale_refuses_strided_data_it_cannot_write_as_a_slice():
    a = np.arange(8, dtype=np.float32)
    with pytest.raises(BufferError, match="not C-contiguous"):
        ex.scale(a[::2], 2.0)
    assert a.tolist() == list(range(8))


def test_scale_refuses_device_memory_rather_than_writing_a_copy():
    x = dpnp_array()
    with pytest.raises(BufferError):
        ex.scale(x, 2.0)
    assert x.asnumpy().tolist() == VALUES


def test_row_sums_views_any_strides_and_returns_without_a_copy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    sums = ex.row_sums(a)
    assert np.from_dlpack(sums).tolist() == a.sum(axis=1).tolist()
    assert np.from_dlpack(sums).ctypes.data == sums.data_ptr
    assert np.from_dlpack(ex.row_sums(a.T[::-1])).tolist() == a.T[::-1].sum(axis=1).tolist()
    with pytest.raises(ValueError, match="2 or more dimensions"):
        ex.row_sums(a[0])


def numpy_arrays():
    """NumPy arrays of every kind the NumPy lane of the import reads or declines."""
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    read_only = base.copy()
    read_only.flags.writeable = False
    raw = np.zeros(17, dtype=np.uint8)
    arrays = {
        "contiguous": base,
        "column": base[:, 1],
        "every-other": base[::2, ::3],
        "reversed": base[::-1, ::-1],
        "transposed": base.T,
        "0-d": np.array(3.5, dtype=np.float64),
        "zero-size": np.zeros((0, 5), dtype=np.int16),
        "read-only": read_only,
        "bool": np.array([True, False, True]),
        "complex": np.arange(6, dtype=np.complex128).reshape(2, 3)[:, ::2],
        "broadcast": np.broadcast_to(np.float32(2.0), (3, 4)),
        "half-item-stride": np.lib.stride_tricks.as_strided(raw[:16].view(np.int16), (3,), (3,)),
        "unaligned": raw[1:].view(np.int32),
        "byte-swapped": np.arange(4, dtype=">i4"),
        "many-dims": np.zeros((1,) * 9 + (2,), dtype=np.int8),
    }
    try:
        import ml_dtypes
    except ImportError:
        pass
    else:
        arrays["bfloat16"] = np.arange(4, dtype=ml_dtypes.bfloat16)
    return arrays


def description(take, x):
    """What taking `x` as a Tensor gives: its description (whether it views `x` in place
    rather than its address, which a copy changes every time), or the exception's type."""
    try:
        t = take(x)
    except Exception as exc:  # noqa: BLE001 - the type is what is compared
        return type(exc)
    in_place = t.data_ptr == x.ctypes.data
    return (t.shape, t.strides, str(t.dtype), t.readonly, in_place, str(t.device))


@pytest.mark.parametrize("name", numpy_arrays().keys())
def test_numpy_arguments_are_described_as_the_dlbridge_package_describes_them(name):
    # An exact ndarray argument takes the NumPy lane once an earlier one has found NumPy's
    # table (through the general lookup): taken twice, it must be described the same way, and
    # as the Python package describes it.
    dlbridge = pytest.importorskip("dlbridge")
    x = numpy_arrays()[name]
    first = description(ex.passthrough, x)
    again = description(ex.passthrough, x)
    assert first == again
    expected = description(dlbridge.from_dlpack, x)
    assert first == expected
    if name == "unaligned":
        assert first[4] is False  # realigned by a copy
    elif not isinstance(first, type):
        assert first[4] is True  # zero-copy


def test_it_exchanges_with_the_dlbridge_package_zero_copy():
    dlbridge = pytest.importorskip("dlbridge")
    a, address = numpy_source()
    d = dlbridge.from_dlpack(a)
    r = ex.ramp(2)
    # each extension has its own Tensor type object; they exchange through DLPack
    assert type(r) is not type(d)
    assert ex.passthrough(d).data_ptr == address
    assert dlbridge.from_dlpack(r).data_ptr == r.data_ptr


def test_it_works_without_the_dlbridge_package():
    module_dir = Path(ex.__file__).resolve().parent.parent
    code = textwrap.dedent(
        """
        import sys
        sys.modules["dlbridge"] = None  # `import dlbridge` now raises ImportError
        import numpy as np
        import dlbridge_example as ex

        a = np.arange(4, dtype=np.float32)
        assert ex.total(a) == 6.0
        assert ex.passthrough(a).data_ptr == a.ctypes.data
        r = ex.ramp(3)
        assert np.from_dlpack(r).tolist() == [0.0, 1.0, 2.0]
        try:
            ex.total([1.0])
        except TypeError:
            pass
        else:
            raise AssertionError("a list was accepted")
        try:
            import dlbridge  # noqa: F401
        except ImportError:
            print("ok without dlbridge")
        """
    )
    env = dict(os.environ, PYTHONPATH=str(module_dir))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok without dlbridge"


def test_the_type_stub_covers_every_function():
    stub = Path(ex.__file__).resolve().parent / "__init__.pyi"  # maturin ships it so
    tree = ast.parse(stub.read_text())
    stubbed = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    functions = {name for name in dir(ex.dlbridge_example) if not name.startswith("_")}
    assert stubbed == functions
