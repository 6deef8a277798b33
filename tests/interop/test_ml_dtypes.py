"""ml_dtypes NumPy arrays (bfloat16, float8, float6, float4) through dlbridge, both ways.

Peer facts (ml_dtypes 0.6, NumPy 2.4, checked on this machine):
- ml_dtypes registers its types as NumPy user types (type numbers from 256, typestr ``<V2``,
  ``|V1`` or even ``<f1`` for float8_e5m2); NumPy's own ``__dlpack__`` refuses every one of them
  ("DLPack only supports signed/unsigned integers, float and complex dtypes").
- float6 and float4 arrays hold one element per byte: DLPack's padded sub-byte layout
  (``IS_SUBBYTE_TYPE_PADDED``, DLPack 1.3), not its packed one.
- int4, uint4, int2 and uint2 are one element per byte too, but dlbridge has no dtype for
  4- and 2-bit integers: refused with the conversion to make.
- ``torch.from_dlpack(t)`` asks for DLPack 1.0, which has no float8 codes: torch takes float8
  from a capsule of a newer version (``t.__dlpack__(max_version=(1, 1))``) or through
  ``dlbridge.convert``. ``jnp.from_dlpack`` asks for a legacy capsule: bfloat16 only, writable.
"""

from __future__ import annotations

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import dlbridge  # noqa: E402
from dlpack_ctypes import inspect_capsule  # noqa: E402

#: ml_dtypes' floating types dlbridge has a DLPack dtype for (those this ml_dtypes has).
FLOATS = [
    name
    for name in (
        "bfloat16", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
        "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
        "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn",
    )
    if hasattr(ml_dtypes, name)
]
#: The sub-byte ones, stored one element per byte.
PADDED = {"float6_e2m3fn": 6, "float6_e3m2fn": 6, "float4_e2m1fn": 4}
#: ml_dtypes' integer types dlbridge has no dtype for, and what the error tells to convert to.
REFUSED = {
    name: ("numpy.uint8" if name.startswith("u") else "numpy.int8")
    for name in ("int4", "uint4", "int2", "uint2")
    if hasattr(ml_dtypes, name)
}

PADDED_FLAG = 1 << 2  # DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED


def bits(a: np.ndarray) -> np.ndarray:
    """The array's elements as unsigned integers of the same size (its exact bit patterns)."""
    return a.view(f"u{a.dtype.itemsize}")


@st.composite
def ml_arrays(draw):
    """An ml_dtypes array of random bit patterns (valid ones for the sub-byte types), sliced,
    maybe transposed, maybe read-only."""
    name = draw(st.sampled_from(FLOATS))
    dt = np.dtype(getattr(ml_dtypes, name))
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=ndim, max_size=ndim)))
    n = int(np.prod(shape))
    raw = draw(st.lists(st.integers(0, 2 ** (8 * dt.itemsize) - 1), min_size=n, max_size=n))
    base = np.array(raw, dtype=f"u{dt.itemsize}").reshape(shape)
    if name in PADDED:
        base &= (1 << PADDED[name]) - 1
    arr = base.view(dt)
    index = tuple(slice(None, None, draw(st.sampled_from([1, 2, -1]))) for _ in shape)
    arr = arr[index] if index else arr
    if arr.ndim >= 2 and draw(st.booleans()):
        arr = arr.T
    if draw(st.booleans()):
        arr = arr.view()
        arr.flags.writeable = False
    return arr


@settings(max_examples=200, deadline=None)
@given(ml_arrays())
def test_import_is_zero_copy_and_round_trips_bit_exactly(a):
    t = dlbridge.from_dlpack(a)
    assert t.dtype == a.dtype.name
    assert t.shape == a.shape
    assert t.strides == tuple(s // a.dtype.itemsize for s in a.strides)
    assert t.readonly == (not a.flags.writeable)
    assert not t.is_copied
    assert t.nbytes == a.nbytes  # one byte per float6 / float4 element
    if a.size:
        assert t.data_ptr == a.ctypes.data
    back = dlbridge.to_numpy(t)
    assert back.dtype == a.dtype
    assert back.flags.writeable == a.flags.writeable
    np.testing.assert_array_equal(bits(back), bits(a))
    if a.size:
        assert np.shares_memory(back, a)


@settings(max_examples=60, deadline=None)
@given(ml_arrays())
def test_copy_is_writable_and_bit_exact(a):
    c = dlbridge.from_dlpack(a, copy=True)
    assert c.dtype == a.dtype.name and c.is_copied and not c.readonly
    back = dlbridge.to_numpy(c)
    assert back.dtype == a.dtype and back.flags.writeable
    np.testing.assert_array_equal(bits(back), bits(a))
    if a.size:
        assert not np.shares_memory(back, a)


@pytest.mark.parametrize("name", FLOATS)
def test_dlpack_export_carries_the_dtype_and_flags(name):
    a = np.array([0.5, 1.0, -2.0, 0.0], dtype=getattr(ml_dtypes, name))
    t = dlbridge.from_dlpack(a)
    info = inspect_capsule(t.__dlpack__(max_version=(1, 3)))
    assert info["dtype"] == (t.dtype.code, t.dtype.bits, 1)
    assert bool(info["flags"] & PADDED_FLAG) == (name in PADDED)
    if name != "bfloat16":  # the float8, float6 and float4 codes came with DLPack 1.1
        with pytest.raises(BufferError, match="needs DLPack 1.1"):
            t.__dlpack__(max_version=(1, 0))


@pytest.mark.parametrize("name", FLOATS)
def test_read_only_stays_read_only(name):
    a = np.array([1.0, -0.5, 2.0], dtype=getattr(ml_dtypes, name))
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    assert t.readonly
    assert inspect_capsule(t.__dlpack__(max_version=(1, 3)))["flags"] & 1  # READ_ONLY
    if name == "bfloat16":  # a legacy capsule cannot say read-only: a writable copy leaves
        assert inspect_capsule(t.__dlpack__())["data_ptr"] != t.data_ptr
    else:  # nor carry the float8, float6 and float4 codes
        with pytest.raises(BufferError, match="DLPack 1.1"):
            t.__dlpack__()
    back = dlbridge.to_numpy(t)
    assert not back.flags.writeable
    with pytest.raises(ValueError):
        back[0] = 0
    np.testing.assert_array_equal(bits(back), bits(a))


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_integer_types_without_a_dtype_are_refused_with_the_way_out(name):
    a = np.array([1, 0, 1], dtype=getattr(ml_dtypes, name))
    with pytest.raises(BufferError, match=rf"ml_dtypes\.{name}.*astype\({REFUSED[name]}\)"):
        dlbridge.from_dlpack(a)
    # the way out works
    t = dlbridge.from_dlpack(a.astype(REFUSED[name].removeprefix("numpy.")))
    assert t.tolist() == [1, 0, 1]


def test_plain_numpy_dtypes_are_unchanged():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = dlbridge.from_dlpack(a)
    assert t.dtype == "float32" and t.data_ptr == a.ctypes.data
    assert dlbridge.to_numpy(t).dtype == np.float32


# --------------------------------------------------------------------------------------------
# torch and JAX, which hold some of these dtypes themselves
# --------------------------------------------------------------------------------------------
TORCH_NAMES = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
               "float8_e8m0fnu"]


@pytest.mark.parametrize("name", TORCH_NAMES)
def test_torch_both_ways(name):
    torch = pytest.importorskip("torch")
    tdtype = getattr(torch, name, None)
    if tdtype is None or not hasattr(ml_dtypes, name):
        pytest.skip(f"this torch or ml_dtypes has no {name}")
    a = np.arange(-4, 4).astype(np.float32).astype(getattr(ml_dtypes, name))
    # ml_dtypes -> torch, zero-copy: through a DLPack 1.1+ capsule and through convert
    for tt in (torch.from_dlpack(dlbridge.from_dlpack(a).__dlpack__(max_version=(1, 3))),
               dlbridge.convert(a, "torch")):
        assert tt.dtype == tdtype
        assert tt.data_ptr() == a.ctypes.data
        itemsize = a.dtype.itemsize
        raw = tt.view(torch.uint8 if itemsize == 1 else torch.int16).numpy().view(f"u{itemsize}")
        np.testing.assert_array_equal(raw, bits(a))
    # torch -> ml_dtypes, zero-copy
    src = torch.tensor([0.5, -1.0, 2.0, 0.25]).to(tdtype)
    back = dlbridge.to_numpy(src)
    assert back.dtype == np.dtype(getattr(ml_dtypes, name))
    assert back.ctypes.data == src.data_ptr()
    np.testing.assert_array_equal(back.astype(np.float32), src.float().numpy())


def test_jax_bfloat16_both_ways():
    pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    a = np.array([1.5, -2.0, 0.0, 3.25], dtype=ml_dtypes.bfloat16)
    j = jnp.from_dlpack(dlbridge.from_dlpack(a))
    assert j.dtype == jnp.bfloat16
    np.testing.assert_array_equal(bits(np.asarray(j)), bits(a))
    back = dlbridge.to_numpy(j)  # JAX buffers are immutable: a read-only view
    assert back.dtype == ml_dtypes.bfloat16 and not back.flags.writeable
    np.testing.assert_array_equal(bits(back), bits(a))


# ------------------------------------------------------------------------------ bcomplex32


def test_bcomplex32_round_trips_zero_copy():
    # kDLBcomplex (code 18, bits 32): a complex of two bfloat16, added to the header after 1.3.
    if not hasattr(ml_dtypes, "bcomplex32"):
        pytest.skip("this ml_dtypes has no bcomplex32")
    a = np.array([[1 + 2j, -0.5 + 3j], [4 - 1j, 0j]], dtype=ml_dtypes.bcomplex32)[:, ::-1]
    t = dlbridge.from_dlpack(a)
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (18, 32, 1) and t.dtype == "bcomplex32"
    assert t.data_ptr == a.ctypes.data and t.strides == (2, -1) and not t.is_copied
    assert t.tolist() == [[-0.5 + 3j, 1 + 2j], [0j, 4 - 1j]]
    back = dlbridge.to_numpy(t)
    assert back.dtype == a.dtype and np.shares_memory(back, a)
    np.testing.assert_array_equal(bits(back), bits(a))
    converted = dlbridge.convert(a, "numpy")
    assert converted.dtype == a.dtype and np.shares_memory(converted, a)
    info = inspect_capsule(t.__dlpack__(max_version=(1, 3)))
    assert info["dtype"] == (18, 32, 1)
    with pytest.raises(BufferError, match="needs DLPack 1.3"):  # unknown to older consumers
        t.__dlpack__(max_version=(1, 2))
    a.flags.writeable = False
    assert not dlbridge.to_numpy(dlbridge.from_dlpack(a)).flags.writeable


def test_bcomplex32_targets_without_it_refuse_with_the_reason():
    if not hasattr(ml_dtypes, "bcomplex32"):
        pytest.skip("this ml_dtypes has no bcomplex32")
    pytest.importorskip("torch")  # torch has the dtype, but its DLPack code refuses it
    a = np.zeros(3, dtype=ml_dtypes.bcomplex32)
    with pytest.raises(BufferError, match="no bcomplex32 through DLPack"):
        dlbridge.convert(a, "torch")


# --------------------------------------------------------------------- NumPy's DLPack registry

_REGISTRY_PROBE = """
import numpy as np, ml_dtypes, dlbridge
a = np.arange(4, dtype=np.float32).astype(ml_dtypes.bfloat16)
assert dlbridge.convert(a, "numpy").dtype == a.dtype
assert dlbridge.to_numpy(dlbridge.from_dlpack(a)).dtype == a.dtype
for probe in (a.__dlpack__, lambda: np.from_dlpack(dlbridge.from_dlpack(a))):
    try:
        probe()
    except BufferError:
        continue
    raise SystemExit("NumPy's DLPack registry maps bfloat16 now")
"""


def test_dlbridge_registers_no_dtype_with_numpy():
    # NumPy >= 2.5 exchanges a dtype registered with numpy.dtypes.register_dlpack_dtype; that
    # registry is process-wide and its entries cannot be taken back, so dlbridge never adds to
    # it: after dlbridge's bfloat16 imports and conversions NumPy still neither exports nor
    # imports bfloat16 through its own DLPack code. (A fresh process: nothing else registered.)
    import subprocess
    import sys

    if not hasattr(np.dtypes, "register_dlpack_dtype"):
        pytest.skip("this NumPy has no DLPack dtype registry")
    proc = subprocess.run([sys.executable, "-c", _REGISTRY_PROBE], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
