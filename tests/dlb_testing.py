"""Deterministic data, the layout catalogue and comparison helpers shared by the tests."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import struct
import subprocess
import sys
from collections.abc import Callable

import numpy as np

# dtypes NumPy can exchange through DLPack (NumPy refuses ml_dtypes' bfloat16 / float8).
NUMPY_DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
]

#: DLPack (code, bits) of each NumPy dtype name.
DLPACK_CODE = {
    "bool": (6, 8),
    "int8": (0, 8),
    "int16": (0, 16),
    "int32": (0, 32),
    "int64": (0, 64),
    "uint8": (1, 8),
    "uint16": (1, 16),
    "uint32": (1, 32),
    "uint64": (1, 64),
    "float16": (2, 16),
    "float32": (2, 32),
    "float64": (2, 64),
    "bfloat16": (4, 16),
    "complex64": (5, 64),
    "complex128": (5, 128),
    "float8_e4m3fn": (10, 8),
    "float8_e5m2": (12, 8),
}

#: Buffer-protocol format letters that are acceptable for each dtype (native order/size).
_LONG = struct.calcsize("l")
BUFFER_FORMATS = {
    "bool": {"?"},
    "int8": {"b"},
    "int16": {"h"},
    "int32": {"i"} | ({"l"} if _LONG == 4 else set()),
    "int64": {"q"} | ({"l"} if _LONG == 8 else set()) | {"n"},
    "uint8": {"B"},
    "uint16": {"H"},
    "uint32": {"I"} | ({"L"} if _LONG == 4 else set()),
    "uint64": {"Q"} | ({"L"} if _LONG == 8 else set()) | {"N"},
    "float16": {"e"},
    "float32": {"f"},
    "float64": {"d"},
    "complex64": {"Zf"},
    "complex128": {"Zd"},
}


def np_dtype_of(name: str) -> np.dtype:
    """NumPy dtype for a dlbridge dtype name (bfloat16 / float8 through ml_dtypes)."""
    if name == "bfloat16" or name.split("_")[0] in ("float8", "float6", "float4"):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def make(dtype: str | np.dtype, shape: tuple[int, ...], order: str = "C") -> np.ndarray:
    """A deterministic array: distinct-ish values, exactly representable in every dtype."""
    dt = np.dtype(dtype) if not isinstance(dtype, str) else np_dtype_of(dtype)
    n = math.prod(shape)
    v = np.arange(n, dtype=np.int64)
    if dt.kind == "b":
        a = (v % 3) == 0
    elif dt.kind == "c":
        a = (v % 50).astype(np.float64) + 1j * ((v % 7) - 3).astype(np.float64)
    elif dt.kind == "u":
        a = (v % 200) + (v % 3)
    elif dt.kind == "i":
        a = (v % 100) - 50
    else:  # float, bfloat16, float8
        a = ((v % 16) - 8).astype(np.float64) * 0.5
    return np.asarray(a).astype(dt).reshape(shape, order=order)


def make_tensor(dtype: str, shape: tuple[int, ...]):
    """A dlbridge Tensor over ``make(dtype, shape)``, for every dtype: the ml_dtypes ones
    (bfloat16, float8), which NumPy cannot export, through their bits as unsigned integers."""
    import dlbridge

    a = make(dtype, shape)
    if a.dtype.type.__module__ == "ml_dtypes":
        return dlbridge.from_dlpack(a.view(f"u{a.dtype.itemsize}")).view(dtype)
    return dlbridge.from_dlpack(a)


def _contig(dtype, shape):
    return make(dtype, shape)


#: Layout name -> factory(dtype) -> numpy array (a view; its base keeps the memory alive).
#: Comments name the CASES.md rows a layout stands for.
LAYOUTS: dict[str, Callable[[str], np.ndarray]] = {
    "contiguous": lambda dt: make(dt, (3, 4)),
    "transposed": lambda dt: make(dt, (3, 4)).T,
    "neg_cols": lambda dt: make(dt, (3, 4))[:, ::-1],  # C1: strides (4, -1) elements
    "neg_rows": lambda dt: make(dt, (4, 3))[::-1],
    "step": lambda dt: make(dt, (12,))[::2],
    "step2d": lambda dt: make(dt, (4, 6))[::2, ::3],
    "fortran": lambda dt: make(dt, (4, 250), order="F"),  # C3
    "scalar0d": lambda dt: make(dt, ()),  # C8
    "zero_size": lambda dt: make(dt, (0, 3)),  # C9
    "zero_size_wide": lambda dt: make(dt, (0, 2048)),  # C10
    "size1_dims": lambda dt: make(dt, (3, 1, 6, 2)),  # C5
    "size1_leading": lambda dt: make(dt, (1, 3, 5, 5)),  # C4 (small)
    "offset": lambda dt: make(dt, (4, 6))[1:, 2:],
    "offset_1d": lambda dt: make(dt, (10,))[3:],
}

#: Layouts whose strides can only be expressed with negative numbers.
NEGATIVE_LAYOUTS = {"neg_cols", "neg_rows"}
#: Layouts that are neither C nor F contiguous (step / offset-in-row / negative).
NON_COMPACT_LAYOUTS = {"neg_cols", "neg_rows", "step", "step2d", "offset"}


def element_strides(arr: np.ndarray) -> tuple[int, ...]:
    """NumPy byte strides converted to elements."""
    return tuple(s // arr.itemsize for s in arr.strides)


def assert_strides_equivalent(got: tuple[int, ...], arr: np.ndarray) -> None:
    """Strides (in elements) agree with ``arr`` on every dim that matters.

    Strides of dims with extent <= 1 are meaningless (exporters normalise them), and a
    zero-size array has no meaningful strides at all.
    """
    assert len(got) == arr.ndim
    if arr.size == 0:
        return
    want = element_strides(arr)
    for i, n in enumerate(arr.shape):
        if n > 1:
            assert got[i] == want[i], f"dim {i}: strides {got} vs numpy {want}"


def assert_tensor_like(t, arr: np.ndarray, *, shared: bool | None = True) -> None:
    """``t`` (a dlbridge.Tensor) describes the same array as ``arr``.

    shared=True: same memory (data_ptr equal); shared=False: different memory; None: don't care.
    """
    assert tuple(t.shape) == arr.shape
    assert t.ndim == arr.ndim
    assert t.size == arr.size
    assert t.dtype == arr.dtype.name, f"{t.dtype!r} != {arr.dtype.name}"
    assert t.itemsize == arr.itemsize
    assert t.nbytes == arr.nbytes
    assert t.device == "cpu"
    if shared:
        assert_strides_equivalent(tuple(t.strides), arr)
    if shared is not None:
        if arr.size > 0:
            if shared:
                assert t.data_ptr == arr.ctypes.data, "expected zero-copy (same data pointer)"
            else:
                assert t.data_ptr != arr.ctypes.data, "expected a copy (different memory)"


def assert_values_equal(got, want) -> None:
    """Element-wise equality, dtype and shape included (NaN-free data)."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape
    assert got.dtype == want.dtype, f"{got.dtype} != {want.dtype}"
    np.testing.assert_array_equal(got, want, strict=True)


def byte_span(arr: np.ndarray) -> tuple[int, int]:
    """[lo, hi) byte range covered by the elements of ``arr``."""
    if arr.size == 0:
        return (arr.ctypes.data, arr.ctypes.data)
    lo = hi = arr.ctypes.data
    for n, s in zip(arr.shape, arr.strides):
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi + arr.itemsize


def import_or_peer_limitation(peer_name: str, consume, tensor, reference: np.ndarray):
    """``consume(tensor)`` (a peer's from_dlpack of a dlbridge Tensor).

    If it raises, check whether the peer also refuses the equivalent NumPy array (the
    reference); if so the failure is the peer's limitation and the test is xfailed with the
    peer's own message. If the peer takes the NumPy array but not the dlbridge Tensor, the
    exception propagates: that is a dlbridge failure.
    """
    import pytest

    try:
        return consume(tensor)
    except Exception as exc_dlbridge:
        try:
            consume(reference)
        except Exception as exc_direct:  # noqa: BLE001
            pytest.xfail(
                f"peer limitation: {peer_name} also refuses the NumPy array directly "
                f"({type(exc_direct).__name__}: {str(exc_direct)[:80]})"
            )
        raise exc_dlbridge


def raw_values(t, dtype: str) -> np.ndarray:
    """Values of a CPU dlbridge Tensor read through its bytes (works for bfloat16 / float8,
    which NumPy cannot import via DLPack): a C-ordered ``copy()``, read with ctypes."""
    import ctypes

    from dlpack_ctypes import inspect_capsule

    c = t.copy()
    ptr = inspect_capsule(c.__dlpack__(max_version=(1, 3)))["data_ptr"]
    raw = ctypes.string_at(ptr, c.nbytes) if c.size else b""
    return np.frombuffer(raw, dtype=np_dtype_of(dtype)).reshape(c.shape).copy()


def require_sycl():
    """dpnp with a usable SYCL device, or skip the test (the device needs scripts/env.sh
    sourced before Python starts)."""
    import pytest

    dpnp = pytest.importorskip("dpnp")
    try:
        dpnp.arange(2)
    except Exception as exc:  # noqa: BLE001 - any failure to make an array means no device
        pytest.skip(f"no SYCL device (source scripts/env.sh before Python starts): {exc}")
    return dpnp


@functools.cache
def cuda_gpu_present() -> bool:
    """True when dlbridge itself can copy to a CUDA GPU here (its driver loads and a device
    answers). The tests of the driver-absent paths skip then: their fake CUDA pointers would
    reach a real driver. The GPU behaviour itself is tested in ``test_cuda.py``."""
    import dlbridge

    try:
        dlbridge.from_dlpack(np.zeros(1, dtype=np.uint8)).to_device("cuda:0")
    except BufferError:
        return False
    return True



@functools.cache
def cupy_usable() -> tuple[bool, str]:
    """(whether CuPy can use a CUDA device here, why not), by the checker's probe: ``import
    cupy`` works without a GPU, its first use does not."""
    from dlbridge_check.adapters.cuda import CupyLib

    lib = CupyLib()
    if not super(CupyLib, lib).installed():
        return False, "cupy is not installed (pip install cupy-cuda13x)"
    return lib.probe()


def skip_unless_usable(name: str) -> None:
    """Skip a test row for the registered library ``name`` where it cannot run in this process:
    not installed, CuPy without a CUDA device, dpnp without a SYCL device, or paddle when
    tensorflow was imported first (paddle 3.3 then segfaults on import)."""
    import pytest

    from dlbridge import namespaces

    if not namespaces.get(name).installed():
        pytest.skip(f"{name} is not installed")
    if name == "cupy":
        usable, why = cupy_usable()
        if not usable:
            pytest.skip(why)
    if name == "dpnp":
        require_sycl()
    if name == "paddle" and "tensorflow" in sys.modules and "paddle" not in sys.modules:
        pytest.skip("paddle segfaults when imported after tensorflow (imported first here)")


#: the checker's cases a library's own checker test runs (two dtypes and a transposed layout)
CHECKER_SMOKE_CASES = "dtype/float32,dtype/float64,layout/transposed"


#: the folder whose sitecustomize simulates dlbridge crashing or hanging in the checker's workers
CHECKER_FAULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "checker_faults")


@dataclasses.dataclass
class CheckerRun:
    """What one ``python -m dlbridge check`` run gave."""

    proc: subprocess.CompletedProcess
    doc: dict | None  # the JSON report (None when the run wrote none)
    page: str | None  # the HTML report, when asked for

    @property
    def output(self) -> str:
        return self.proc.stdout + self.proc.stderr

    @property
    def results(self) -> dict[tuple[str, str, str, str], dict]:
        """The results by (producer, consumer, case, route)."""
        assert self.doc is not None, self.output[-3000:]
        return {(r["producer"], r["consumer"], r["case"], r["route"]): r
                for r in self.doc["results"]}


def run_checker(tmp_path, *args: str, expect: int | None = 0, html: bool = False,
                python: str = sys.executable, env: dict[str, str] | None = None,
                cwd=None, crash: str | None = None, hang: str | None = None,
                timeout: float = 600) -> CheckerRun:
    """``python -m dlbridge check ARGS --json FILE -q`` (and ``--html FILE``) in a subprocess,
    the one way the tests run the checker. ``expect``: the exit status it must have (None: any);
    ``env``: its whole environment (default: this one's); ``crash`` / ``hang``: a unit
    (``producer|consumer|case``) whose dlbridge route aborts or hangs in dlbridge.from_dlpack."""
    out = tmp_path / "check.json"
    page = tmp_path / "check.html"
    cmd = [python, "-m", "dlbridge", "check", *args, "--json", str(out), "-q"]
    if html:
        cmd += ["--html", str(page)]
    env = dict(os.environ if env is None else env)
    if crash or hang:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [CHECKER_FAULTS, env.get("PYTHONPATH")]))
        env.update(DLBRIDGE_CHECK_TEST_CRASH=crash or "", DLBRIDGE_CHECK_TEST_HANG=hang or "")
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)
    run = CheckerRun(proc, json.loads(out.read_text()) if out.exists() else None,
                     page.read_text() if html and page.exists() else None)
    if expect is not None:
        assert proc.returncode == expect, (proc.returncode, run.output[-6000:])
    return run


class SameCapsule:
    """A host producer whose ``__dlpack__`` hands out one capsule made beforehand, every time
    (to give a consumer a capsule of a chosen flavour, or to play a buggy producer)."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)
