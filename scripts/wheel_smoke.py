"""A built wheel's smoke set, run in an interpreter away from the project's venv:

    python scripts/wheel_smoke.py MACHINE [EXTENSION_SUFFIX]

Run by scripts/aarch64_smoke.sh (MACHINE aarch64, an emulated arm64 Python) and by
scripts/py315_smoke.sh (x86_64, CPython 3.15 with the abi3 and then the abi3t wheel). The first
check asserts the machine, that dlbridge comes from an installed wheel, and, given
EXTENSION_SUFFIX, that the extension file ends with it and that the interpreter's
importlib.machinery.EXTENSION_SUFFIXES lists it (both printed). Each check exchanges with the
real libraries installed next to the wheel (NumPy, and PyArrow when it installs there):
buffer-protocol and DLPack round trips both ways, strided copies through the copy kernels,
pickle protocol 5 with out-of-band buffers, shared memory sent to a spawned process, Arrow in
and out, and bad input. Prints one line per check; any failure raises.
"""

from __future__ import annotations

import multiprocessing
import pickle
import platform
import sys
import time
from importlib import machinery, util

import numpy as np

import dlbridge
from dlbridge import _native

MACHINE = sys.argv[1] if len(sys.argv) > 1 else "aarch64"
SUFFIX = sys.argv[2] if len(sys.argv) > 2 else None


def check_platform() -> str:
    assert platform.machine() == MACHINE, platform.machine()
    assert "site-packages" in dlbridge.__file__, dlbridge.__file__  # the wheel, not a checkout
    extension = _native.__file__ or ""
    print(f"   extension {extension}\n   EXTENSION_SUFFIXES {machinery.EXTENSION_SUFFIXES}")
    if SUFFIX is not None:
        assert extension.endswith(f"_native{SUFFIX}"), (extension, SUFFIX)
        assert SUFFIX in machinery.EXTENSION_SUFFIXES, machinery.EXTENSION_SUFFIXES
    gil_enabled = getattr(sys, "_is_gil_enabled", lambda: True)()  # 3.13 and newer
    gil = "" if gil_enabled else ", GIL off"
    return (
        f"{platform.machine()}, Python {platform.python_version()}{gil}, "
        f"dlbridge {dlbridge.__version__}, {extension.rsplit('/', 1)[-1]}"
    )


def check_buffer_round_trip() -> str:
    data = bytearray(b"dlbridge")
    t = dlbridge.from_dlpack(data)
    assert (t.shape, str(t.dtype), t.readonly) == ((8,), "uint8", False)
    view = memoryview(t)
    view[0] = ord("D")
    assert data == bytearray(b"Dlbridge")  # the same memory, no copy
    frozen = dlbridge.from_dlpack(b"read-only")
    assert frozen.readonly and memoryview(frozen).readonly
    return "bytearray and bytes through the buffer protocol, zero-copy, read-only kept"


DTYPES = ["bool", "int8", "uint16", "int32", "int64", "float16", "float32", "float64",
          "complex64", "complex128"]


def check_dlpack_round_trips() -> str:
    for name in DTYPES:
        a = (np.arange(24) % 7).astype(name).reshape(4, 6)
        t = dlbridge.from_dlpack(a)
        assert str(t.dtype) == name and t.shape == (4, 6), (name, t.dtype, t.shape)
        b = np.from_dlpack(t)
        assert np.shares_memory(a, b) and np.array_equal(a, b), name
    a = np.arange(10.0)
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    assert t.readonly
    assert not np.from_dlpack(t).flags.writeable
    return f"NumPy -> dlbridge -> NumPy zero-copy for {len(DTYPES)} dtypes; read-only kept"


def check_strided_copies() -> str:
    rng = np.random.default_rng(30)
    cases = [
        # (shape, dtype): transposes large enough for the tiled, parallel kernels, and the 1-byte
        # transpose past 16 MiB that walks in bands
        ((1024, 768), "float32"),
        ((640, 512), "float64"),
        ((512, 384), "complex128"),
        ((777, 1031), "uint16"),
        ((4160, 4160), "uint8"),
    ]
    for shape, dtype in cases:
        a = rng.integers(0, 100, size=shape).astype(dtype)
        for view in (a.T, a[::2, 1::3], a[::-1, ::2].T):
            expect = np.ascontiguousarray(view)
            c = np.from_dlpack(dlbridge.from_dlpack(view).copy())
            assert c.flags.c_contiguous and np.array_equal(c, expect), (shape, dtype)
            f = np.from_dlpack(dlbridge.from_dlpack(view).copy("F"))
            assert f.flags.f_contiguous and np.array_equal(f, expect), (shape, dtype)
        dst = dlbridge.Tensor(np.zeros(shape[::-1], dtype=dtype))
        dlbridge.copyto(dst, a.T)
        assert np.array_equal(np.from_dlpack(dst), a.T), (shape, dtype)
    return f"{len(cases)} dtypes/shapes: transposes and strided slices to C and F order, copyto"


def check_pickle() -> str:
    a = np.arange(60, dtype=np.float64).reshape(6, 10)
    for source in (a, a.T, a[1::2, ::3]):
        t = dlbridge.from_dlpack(source)
        buffers: list[pickle.PickleBuffer] = []
        blob = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
        back = pickle.loads(blob, buffers=buffers)
        assert np.array_equal(np.from_dlpack(back), source)
        in_band = pickle.loads(pickle.dumps(t, protocol=4))
        assert np.array_equal(np.from_dlpack(in_band), source)
    return "protocol 5 out of band and protocol 4 in band, contiguous and strided"


def _double(t: dlbridge.Tensor) -> None:
    np.from_dlpack(t)[...] *= 2


def check_shared_memory() -> str:
    shared = dlbridge.to_shared(np.arange(1000, dtype=np.int32))
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_double, args=(shared,))
    proc.start()
    proc.join(120)
    assert proc.exitcode == 0, proc.exitcode
    assert np.array_equal(np.from_dlpack(shared), 2 * np.arange(1000, dtype=np.int32))
    return "to_shared memory written by a spawned process (memfd sent by multiprocessing)"


def check_arrow() -> str:
    if util.find_spec("pyarrow") is None:
        return "SKIPPED: PyArrow is not installed (no wheel for this interpreter)"
    import pyarrow as pa

    arr = pa.array(np.arange(12, dtype=np.int64))
    t = dlbridge.from_arrow(arr)
    assert np.array_equal(np.from_dlpack(t), np.arange(12))
    back = pa.array(dlbridge.from_dlpack(np.linspace(0, 1, 5)))
    assert back.type == pa.float64() and back.to_pylist() == list(np.linspace(0, 1, 5))
    return "PyArrow -> dlbridge (Arrow C data) and dlbridge -> PyArrow"


def check_bad_input() -> str:
    try:
        dlbridge.from_dlpack(object())
    except TypeError as e:
        assert "object" in str(e), e
    else:
        raise AssertionError("from_dlpack(object()) did not raise")
    try:
        dlbridge.from_dlpack(np.arange(4), copy=False, device="cuda:0")
    except (BufferError, ValueError, RuntimeError) as e:
        assert str(e), e
    else:
        raise AssertionError("a CUDA device on a machine without one did not raise")
    return "no exchange protocol: TypeError; a missing CUDA device: a clear exception"


def main() -> None:
    checks = [check_platform, check_buffer_round_trip, check_dlpack_round_trips,
              check_strided_copies, check_pickle, check_shared_memory, check_arrow,
              check_bad_input]
    for check in checks:
        start = time.perf_counter()
        what = check()
        print(
            f"ok {check.__name__[6:]:<20} {time.perf_counter() - start:5.1f} s  {what}", flush=True
        )
    print(f"wheel smoke ({MACHINE}): {len(checks)} checks passed", flush=True)


if __name__ == "__main__":
    sys.exit(main())
