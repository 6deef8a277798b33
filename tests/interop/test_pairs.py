"""``dlbridge.convert`` for every ordered pair of installed libraries (C1 C2 C5 C15 C16 C25 C27
C36 C37 C38 C39 C40).

Sources are built by the conformance checker's adapters (``dlbridge_check.libraries``: each
library's own way of making an array with a given dtype, layout and read-only flag, or
``Unsupported`` when it cannot express it). For each source case and each copy mode, the result
is checked independently of the planner:

- its type is the target library's array type; dtype and shape are kept; every value equals
  the reference (read with the result library's own host conversion, compared byte for byte);
- aliasing (same first-element address) agrees with the reported plan (``copies == 0``), with
  ``copy=True`` (never aliased, result writable) and ``copy=False`` (always aliased);
- a read-only or immutable source is never aliased by a writable result (C15, C16);
- ``copy=False`` fails (BufferError) exactly when ``copy=None`` needs a copy;
- ``explain`` agrees with ``convert`` (possible, and the number of copies);
- refusals are BufferErrors, and under ``copy=None`` only for dtypes the target lacks (the
  peer facts below, measured).

dpnp arrays live on a SYCL device (``oneapi:0``): pairs with dpnp on one side pass ``device=``
(``"cpu"`` or ``"oneapi:0"``) and check that ``device=None`` is refused with that hint (C36).
CuPy's pairs do the same with ``cuda:0``; without a usable CUDA device they skip, with the
reason the checker's probe gives.

The peers' own quirks need no exceptions here, as ``convert`` works around them: Paddle ignores
READ_ONLY and misreads negative strides (copied for it), MLX's ``from_dlpack`` narrows float64
(imported with its dtype instead), Warp and MLX export legacy capsules only (imported
read-only). Paddle cannot be imported after tensorflow in one process (a segfault): see
``PADDLE_AFTER_TENSORFLOW``.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

import dlbridge
from dlb_testing import cupy_usable
from dlbridge import namespaces as nsmod
from dlbridge_check import libraries as L

jax = pytest.importorskip("jax")


@pytest.fixture(scope="module", autouse=True)
def _x64():
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", old)


def _sycl_ok() -> bool:
    try:
        import dpnp

        dpnp.arange(2)
        return True
    except Exception:  # noqa: BLE001
        return False


#: paddle 3.3 segfaults when it is imported after tensorflow 2.21 in one process (the other
#: order works), so it is imported here, before any pair uses tensorflow; when tensorflow came
#: first (an earlier test file in this session), the pairs with paddle skip.
PADDLE_AFTER_TENSORFLOW = "tensorflow" in sys.modules and "paddle" not in sys.modules
if nsmod.get("paddle").installed() and not PADDLE_AFTER_TENSORFLOW:
    L.by_name()["paddle"].setup()


def _cupy_skip_reason() -> str | None:
    """Why the pairs with CuPy cannot run here (it needs a CUDA device), or None."""
    usable, why = cupy_usable()
    return None if usable else f"cupy: {why}"


TARGETS = [
    n
    for n in (
        "numpy",
        "torch",
        "jax",
        "pyarrow",
        "dpnp",
        "array_api_strict",
        "tvm_ffi",
        "tensorflow",
        "paddle",
        "mlx",
        "warp",
        "pandas",
        "cupy",
        "dlbridge",
    )
    if nsmod.get(n).installed() and (n != "dpnp" or _sycl_ok())
]
SOURCES = TARGETS  # the same libraries as producers

#: dtypes each target lacks (measured: numpy 2.4 + ml_dtypes, torch 2.15, jax 0.10 with x64,
#: pyarrow 26, dpnp 0.20, array_api_strict 2.6, tvm_ffi 0.1, tensorflow-cpu 2.21, mlx 0.32,
#: warp 1.19, pandas 3.1)
LACKS = {
    "pyarrow": {"complex64", "complex128", "bfloat16", "float8_e4m3fn"},
    "dpnp": {"bfloat16", "float8_e4m3fn"},
    "array_api_strict": {"float16", "bfloat16", "float8_e4m3fn"},
    "tensorflow": {"float8_e4m3fn"},  # tensorflow-cpu 2.21: no float8 through DLPack
    "mlx": {"complex128", "float8_e4m3fn"},  # float64 is kept: mx.array(t, dtype=float64)
    "warp": {"complex64", "complex128", "bfloat16", "float8_e4m3fn"},
    "pandas": {"bfloat16", "float8_e4m3fn"},  # columns of NumPy dtypes only
    "cupy": {"bfloat16", "float8_e4m3fn"},  # cupy 14 (from the checker's adapter)
}


def lacks_shape(target: str, ndim: int) -> bool:
    """Whether the target has no arrays of ``ndim`` dimensions (pyarrow and Warp: no 0-d;
    pandas: 1-D Series and 2-D DataFrames only)."""
    if target in ("pyarrow", "warp"):
        return ndim == 0
    if target == "pandas":
        return ndim not in (1, 2)
    return False

DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128", "bfloat16", "float8_e4m3fn",
]
N = (slice(None),)
CASES: list[tuple[str, L.Recipe]] = [(dt, L.Recipe(dtype=dt)) for dt in DTYPES] + [
    ("transposed", L.Recipe("float32", (3, 4), ops=(("T",),))),  # C3-like
    ("fortran", L.Recipe("float64", (4, 25), order="F")),
    ("neg_cols", L.Recipe("float32", (3, 4), ops=(("ix", N + (slice(None, None, -1),)),))),  # C1
    ("neg_1d", L.Recipe("int32", (10,), ops=(("ix", (slice(None, None, -1),)),))),  # C2
    (
        "step",
        L.Recipe("float64", (4, 6), ops=(("ix", (slice(None, None, 2), slice(None, None, 3))),)),
    ),
    ("step_1d", L.Recipe("int16", (12,), ops=(("ix", (slice(None, None, 2),)),))),
    ("offset", L.Recipe("float32", (4, 6), ops=(("ix", (slice(1, None), slice(2, None))),))),
    ("offset_1d", L.Recipe("uint16", (10,), ops=(("ix", (slice(3, None),)),))),
    ("size1_dims", L.Recipe("float32", (3, 1, 6, 2))),  # C5
    ("scalar0d", L.Recipe("float64", ())),
    ("zero_size", L.Recipe("float32", (0, 3))),
    ("broadcast", L.Recipe("int32", (4,), ops=(("broadcast", (3, 4)),))),
    ("shift8", L.Recipe("float64", (3, 4), ops=(("shift8",),))),  # C40: not 64-byte aligned
    ("misalign", L.Recipe("int32", (5,), ops=(("misalign",),))),  # C40: not item-aligned
    ("readonly", L.Recipe("float64", (3, 4), readonly=True)),  # C15 C16
    (
        "readonly_neg",
        L.Recipe("float32", (3, 4), ops=(("ix", N + (slice(None, None, -1),)),), readonly=True),
    ),
    ("readonly_uint32", L.Recipe("uint32", (6,), readonly=True)),  # C27
]
#: cases also run with copy=True (all run with None and False)
COPY_TRUE = {
    "float32",
    "bool",
    "bfloat16",
    "transposed",
    "neg_cols",
    "readonly",
    "scalar0d",
    "zero_size",
}

ADAPTERS = L.by_name()


# ---------------------------------------------------------------------------------- sources


def make_source(lib: str, recipe: L.Recipe):
    """The source array, or None when ``lib`` cannot express the case."""
    ref = L.reference(recipe) if _ref_ok(recipe) else None
    if ref is None:
        return None, None
    try:
        if lib == "dlbridge":
            try:
                x = dlbridge.from_dlpack(ref)
            except BufferError:
                x = dlbridge.from_dlpack(ADAPTERS["torch"].make(recipe, ref))
            if any(op[0] == "misalign" for op in recipe.ops) and x.data_ptr % x.itemsize == 0:
                return None, None  # dlbridge realigned it on import: no misaligned Tensor exists
        else:
            x = ADAPTERS[lib].make(recipe, ref)
    except (L.Unsupported, BufferError, TypeError, RuntimeError, ValueError):
        return None, None
    if lib == "tvm_ffi" and recipe.readonly:
        return None, None
    if lib == "pyarrow" and recipe.dtype == "bool" and ref.ndim > 1:
        return None, None  # pyarrow.Tensor.from_numpy stores booleans as uint8
    if lib == "tensorflow" and recipe.dtype.startswith("float8"):
        return None, None  # TensorFlow's own __dlpack__ refuses float8 (InvalidArgumentError)
    return x, ref


def _ref_ok(recipe: L.Recipe) -> bool:
    try:
        L.reference(recipe)
        return True
    except L.Unsupported:
        return False


def src_ptr(lib: str, x, ref: np.ndarray) -> int | None:
    if lib == "dlbridge":
        return int(x.data_ptr)
    if lib == "pyarrow":
        return _pa_ptr(x)
    return ADAPTERS[lib].src_ptr(x)


def src_readonly(lib: str, x) -> bool:
    if lib == "dlbridge":
        return bool(x.readonly)
    return bool(ADAPTERS[lib].src_readonly(x))


# ---------------------------------------------------------------------------------- results


RESULT_TYPES = {
    "numpy": lambda y: isinstance(y, np.ndarray),
    "torch": lambda y: type(y).__module__.startswith("torch"),
    "jax": lambda y: isinstance(y, jax.Array),
    "pyarrow": lambda y: type(y).__module__.startswith("pyarrow") and "Array" in type(y).__name__,
    "dpnp": lambda y: type(y).__module__.startswith("dpnp"),
    "array_api_strict": lambda y: type(y).__module__.startswith("array_api_strict"),
    "tvm_ffi": lambda y: type(y).__module__.startswith("tvm_ffi"),
    "tensorflow": lambda y: type(y).__module__.startswith("tensorflow"),
    "paddle": lambda y: type(y).__module__.startswith("paddle"),
    "mlx": lambda y: type(y).__module__.startswith("mlx"),
    "warp": lambda y: type(y).__module__.startswith("warp"),
    "pandas": lambda y: type(y).__module__.startswith("pandas")
    and type(y).__name__ in ("Series", "DataFrame"),
    "cupy": lambda y: type(y).__module__.startswith("cupy"),
    "dlbridge": lambda y: isinstance(y, dlbridge.Tensor),
}


def _pa_ptr(y) -> int | None:
    """Address of the first element of a pyarrow array (primitive, bool8, fixed_shape_tensor)."""
    import pyarrow as pa

    if isinstance(y, pa.ChunkedArray):
        y = y.chunk(0)
    if isinstance(y, pa.Tensor):
        return None
    arr = y.storage if isinstance(y, pa.ExtensionArray) else y
    if isinstance(arr, pa.FixedSizeListArray):
        values = arr.values  # already offset by arr.offset * list_size
        values = values.storage if isinstance(values, pa.ExtensionArray) else values
        return values.buffers()[1].address + values.offset * values.type.bit_width // 8
    return arr.buffers()[1].address + arr.offset * arr.type.bit_width // 8


def _pa_values(y) -> np.ndarray:
    import pyarrow as pa

    if isinstance(y, pa.FixedShapeTensorArray):
        try:
            return np.asarray(y.to_numpy_ndarray())
        except (pa.ArrowTypeError, pa.ArrowNotImplementedError):  # bool8 cells
            flat = y.storage.flatten()
            flat = flat.storage if isinstance(flat, pa.ExtensionArray) else flat
            return flat.to_numpy(zero_copy_only=False).astype(bool).reshape((len(y), *y.type.shape))
    return y.to_numpy(zero_copy_only=False)


def result_facts(target: str, y):
    """(dtype name, shape, C-order host values, first-element address, writable)."""
    if target == "pyarrow":
        v = _pa_values(y)
        return str(v.dtype), v.shape, np.ascontiguousarray(v), _pa_ptr(y), False
    if target == "pandas" and type(y).__name__ == "DataFrame":
        v = y.to_numpy()  # a read-only view of the frame's one block (copy-on-write)
        block = y._mgr.blocks[0].values if len(y._mgr.blocks) == 1 else None
        ptr = v.__array_interface__["data"][0] if v.size else None
        writable = block is not None and bool(block.flags.writeable)  # df.iloc[i, j] = x
        return v.dtype.name, v.shape, np.ascontiguousarray(v), ptr, writable
    obs = L.observe(y)
    if obs.values is None and obs.device is not None and obs.device[0] == 14:
        import dpnp  # a dlbridge Tensor on the SYCL device: read through dpnp

        obs.values = np.ascontiguousarray(dpnp.asnumpy(dpnp.from_dlpack(y)))
    writable = {
        "torch": True,  # torch tensors cannot be read-only
        "tvm_ffi": True,  # no read-only flag: kernels may write it
        "jax": False,  # immutable
        "tensorflow": False,  # immutable
    }.get(target, obs.writable)
    return obs.dtype, tuple(obs.shape), obs.values, obs.ptr, writable


def same_values(got: np.ndarray, want: np.ndarray) -> bool:
    got, want = np.ascontiguousarray(got), np.ascontiguousarray(want)
    if got.shape != want.shape:
        return False
    if got.dtype.itemsize != want.dtype.itemsize:
        return False
    return got.tobytes() == want.tobytes()


# ---------------------------------------------------------------------------------- the matrix


def _device_for(src: str, dst: str, x) -> str | None:
    here = nsmod.get(src).device(x) if src != "dlbridge" else x.device
    tgt = nsmod.get(dst)
    if here is None or tgt.can_hold(here):
        return None
    return tgt.device_hint()


def check_case(src: str, dst: str, name: str, recipe: L.Recipe, problems: list[str]) -> None:
    x, ref = make_source(src, recipe)
    if x is None:
        return
    device = _device_for(src, dst, x)
    where = f"{src}->{dst} [{name}]" + (f" device={device}" if device else "")
    ro = src_readonly(src, x)
    sptr = src_ptr(src, x, ref)
    size = math.prod(recipe.shape) if not recipe.ops else ref.size
    lacks = recipe.dtype in LACKS.get(dst, set()) or lacks_shape(dst, ref.ndim)

    outcomes = {}
    for copy in (None, False, True):
        if copy is True and name not in COPY_TRUE:
            continue
        tag = f"{where} copy={copy}"
        plan = dlbridge.explain(x, dst, device=device, copy=copy)
        try:
            y, done = dlbridge.convert(x, dst, device=device, copy=copy, report=True)
        except BufferError as e:
            outcomes[copy] = None
            if plan.possible:
                problems.append(f"{tag}: explain said possible, convert raised {e}")
            if copy is None and not lacks:
                problems.append(f"{tag}: unexpected refusal: {e}")
            continue
        except Exception as e:  # noqa: BLE001
            problems.append(f"{tag}: {type(e).__name__} (not BufferError): {e}")
            continue
        outcomes[copy] = done.copies
        if lacks:
            problems.append(f"{tag}: expected a refusal (the target lacks {recipe.dtype} / 0-d)")
        if not plan.possible:
            problems.append(f"{tag}: explain said impossible ({plan.reason}) but convert worked")
        elif done.copies > plan.copies or (not device and done.copies != plan.copies):
            problems.append(
                f"{tag}: explain planned {plan.copies} copies, convert made {done.copies}"
            )
        if not RESULT_TYPES[dst](y):
            problems.append(f"{tag}: result type {type(y).__module__}.{type(y).__name__}")
            continue
        dtype, shape, values, rptr, writable = result_facts(dst, y)
        if shape != ref.shape:
            problems.append(f"{tag}: shape {shape} != {ref.shape}")
            continue
        if dtype != recipe.dtype and not (dst == "pyarrow" and recipe.dtype == "bool"):
            problems.append(f"{tag}: dtype {dtype} != {recipe.dtype}")
        if values is None or not same_values(values, ref):
            problems.append(f"{tag}: values differ\n got {values}\nwant {ref}")
        if size and rptr is not None and sptr is not None:
            aliased = rptr == sptr
            if aliased != (done.copies == 0):
                problems.append(
                    f"{tag}: aliased={aliased} but the plan reports {done.copies} copies"
                )
            if copy is True and aliased:
                problems.append(f"{tag}: copy=True returned an alias")
            if copy is False and not aliased:
                problems.append(f"{tag}: copy=False returned a copy")
            # (a source returned as is, within one library, makes no new alias)
            if aliased and ro and writable and y is not x:
                problems.append(f"{tag}: writable alias of read-only memory (C15/C16)")
        if copy is True and writable is False and dst not in ("jax", "pyarrow", "tensorflow"):
            problems.append(f"{tag}: copy=True result is not writable")
    if None in outcomes and False in outcomes:
        needs_copy = outcomes[None] is not None and outcomes[None] > 0
        if outcomes[None] is not None and (outcomes[False] is None) != needs_copy:
            problems.append(
                f"{where}: copy=False {'refused' if outcomes[False] is None else 'worked'} but "
                f"copy=None made {outcomes[None]} copies"
            )


PAIRS = [(s, d) for s in SOURCES for d in TARGETS]


def skip_unrunnable(src: str, dst: str) -> None:
    """Skip a pair whose library cannot run in this process, with the reason."""
    if "paddle" in (src, dst) and PADDLE_AFTER_TENSORFLOW:
        pytest.skip("paddle segfaults when imported after tensorflow (imported first here)")
    if "cupy" in (src, dst):
        reason = _cupy_skip_reason()
        if reason:
            pytest.skip(reason)


@pytest.mark.parametrize("src,dst", PAIRS, ids=[f"{s}->{d}" for s, d in PAIRS])
def test_pair(src, dst):
    skip_unrunnable(src, dst)
    problems: list[str] = []
    for name, recipe in CASES:
        check_case(src, dst, name, recipe, problems)
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:40])


CROSS = [(s, d) for s in SOURCES for d in TARGETS if {"dpnp", "cupy"} & {s, d} and s != d]


@pytest.mark.parametrize("src,dst", CROSS, ids=[f"{s}->{d}" for s, d in CROSS])
def test_cross_device_needs_device(src, dst):  # C36 C39
    """Without ``device=``, a target that cannot hold the data where it is refuses, naming the
    ``device=`` to pass; with it but ``copy=False`` the transfer is refused (BufferError)."""
    skip_unrunnable(src, dst)
    recipe = L.Recipe("float32", (3, 4))
    x, _ = make_source(src, recipe)
    if x is None:
        pytest.skip(f"{src} cannot build the source")
    device = _device_for(src, dst, x)
    if device is None:
        y = dlbridge.convert(x, dst)  # the target holds the data where it is (oneAPI): zero-copy
        assert dlbridge.explain(x, dst).copies == 0
        return
    plan = dlbridge.explain(x, dst)
    assert not plan.possible and plan.error == "BufferError"
    assert f"device={device!r}" in plan.reason
    with pytest.raises(BufferError, match="device="):
        dlbridge.convert(x, dst)
    with pytest.raises(BufferError, match="copy=False"):
        dlbridge.convert(x, dst, device=device, copy=False)
    y = dlbridge.convert(x, dst, device=device)
    np.testing.assert_array_equal(result_facts(dst, y)[2], L.reference(recipe))
