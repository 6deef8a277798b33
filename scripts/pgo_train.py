"""The training run of dlbridge's profile-guided build (scripts/pgo.sh).

Runs what users run most, with an instrumented build of the extension on the path: imports
from every installed peer, exports to them, host copies of every kernel (contiguous, shared
between threads, streaming, strided, transposed tiles of 1- to 16-byte elements), Arrow and
pickle round trips. The compiler then lays out and optimises the code by these counts: what
runs here is kept together and fast, what never runs here (error paths, CUDA) is moved out of
the way. Peers that are not installed are skipped; NumPy is required.

The balance of the parts is part of the build's speed: a kernel's loop is counted once per
element or tile, and counts far above the imports' leave the imports unoptimised (with many
large copies here, a tvm-ffi import took 194 ns instead of 145). After a change here, run
benches/bench_exchange.py and bench_copy.py on the new build (scripts/bootstrap.sh).

Usage: python scripts/pgo_train.py   (a few seconds; prints one line per part)
"""

from __future__ import annotations

import importlib
import pickle
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import dlbridge

SMALL_DTYPES = ("bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32",
                "float64", "complex64", "complex128")


def repeat(n: int, fn: Callable[[], Any]) -> None:
    """Call ``fn`` ``n`` times."""
    for _ in range(n):
        fn()


def peer(name: str) -> Any | None:
    """The module ``name``, or None when it is not installed (or fails to import)."""
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - any import failure means "not here"
        return None


def numpy_exchanges() -> None:
    """Imports and exports of small arrays, through every protocol NumPy speaks."""
    for name in SMALL_DTYPES:
        a = np.ones((4, 4), dtype=name)
        repeat(3000, lambda: dlbridge.from_dlpack(a))
        x = dlbridge.from_dlpack(a)
        repeat(3000, lambda: np.from_dlpack(x))
        repeat(100, lambda: dlbridge.to_numpy(x))
        repeat(100, lambda: np.asarray(x))
        repeat(100, lambda: dlbridge.to_memoryview(x))
        repeat(100, lambda: dlbridge.from_dlpack(memoryview(a)))
        repeat(100, lambda: dlbridge.from_dlpack(a.T))
        repeat(100, lambda: dlbridge.from_dlpack(a, copy=True))
        repeat(50, lambda: dlbridge.convert(a, np, copy=True))
        repeat(50, lambda: x.__dlpack__(max_version=(1, 0)))
        repeat(50, lambda: x.__dlpack__())
        repeat(50, lambda: x.__dlpack_device__())
    ro = np.arange(16.0)
    ro.flags.writeable = False
    repeat(300, lambda: dlbridge.from_dlpack(ro))
    big = np.zeros(1 << 16, np.float32)
    repeat(300, lambda: dlbridge.from_dlpack(big[::2]))
    repeat(100, lambda: dlbridge.describe(big))


def host_copies() -> None:
    """Every copy kernel: contiguous (one thread, shared between threads, streaming), strided,
    tiles. Small arrays mostly: a kernel's inner loop runs once per element or tile, and counts
    far above the imports' would make the profile treat the imports as cold."""
    for nbytes, reps in ((1 << 12, 2000), (1 << 20, 20), (8 << 20, 2), (48 << 20, 1)):
        a = np.ones(nbytes // 4, np.float32)
        x = dlbridge.from_dlpack(a)
        dst = dlbridge.from_dlpack(np.empty_like(a))
        repeat(reps, lambda: dlbridge.copyto(dst, x))
        repeat(reps, lambda: x.copy())
        repeat(reps, lambda: dlbridge.to_numpy(x, copy=True))
    # tiles of every element size: full ones (256 x 256), edges (100 x 100), shared (2048 x 2048)
    for name in ("uint8", "uint16", "float32", "float64", "complex128"):
        for side, reps in ((100, 20), (256, 10), (2048, 1)):
            a = np.ones((side, side), dtype=name)
            xt = dlbridge.from_dlpack(a.T)
            dst = dlbridge.from_dlpack(np.empty_like(a))
            repeat(reps, lambda: xt.copy())
            repeat(reps, lambda: dlbridge.copyto(dst, xt))
        strided = np.ones((64, 64, 3), dtype=name)[:, ::2]
        xs = dlbridge.from_dlpack(strided)
        repeat(100, lambda: xs.copy())
        repeat(100, lambda: dlbridge.to_numpy(xs))


def torch_exchanges(torch: Any) -> None:
    """torch tensors through the C exchange table, and back through DLPack."""
    for dtype in (torch.float32, torch.int64, torch.bfloat16, torch.uint8):
        t = torch.ones(16, dtype=dtype)
        repeat(20000, lambda: dlbridge.from_dlpack(t))
        x = dlbridge.from_dlpack(t)
        repeat(5000, lambda: torch.from_dlpack(x))
    t = torch.ones(16)
    repeat(200, lambda: dlbridge.convert(t, np))
    repeat(200, lambda: dlbridge.convert(np.ones(16), torch))


def dlpack_producers() -> None:
    """Producers that offer only ``__dlpack__``: JAX, tvm-ffi, array-api-strict."""
    jnp = peer("jax.numpy")
    if jnp is not None:
        j = jnp.ones(16, jnp.float32)
        repeat(5000, lambda: dlbridge.from_dlpack(j))
    tvm_ffi = peer("tvm_ffi")
    if tvm_ffi is not None:
        v = tvm_ffi.from_dlpack(np.ones(16, np.float32))
        repeat(30000, lambda: dlbridge.from_dlpack(v))
    xp = peer("array_api_strict")
    if xp is not None:
        s = xp.asarray(np.ones(16, np.float32))
        repeat(5000, lambda: dlbridge.from_dlpack(s))


def arrow_exchanges(pa: Any) -> None:
    """pyarrow arrays in and out, and N-d tensors as fixed_shape_tensor."""
    arr = pa.array(np.arange(16, dtype=np.float32))
    repeat(20000, lambda: dlbridge.from_dlpack(arr))
    repeat(10000, lambda: np.from_dlpack(dlbridge.from_dlpack(arr)))
    repeat(500, lambda: dlbridge.from_arrow(arr))
    x = dlbridge.from_dlpack(np.arange(16, dtype=np.float32))
    repeat(500, lambda: pa.array(x))
    grid = dlbridge.from_dlpack(np.ones((8, 4, 4), np.float32))
    repeat(200, lambda: pa.array(grid))
    repeat(200, lambda: dlbridge.from_arrow(pa.array(grid)))


def pickles() -> None:
    """Pickle round trips, in band and out of band."""
    x = dlbridge.from_dlpack(np.ones((64, 64), np.float32))
    repeat(300, lambda: pickle.loads(pickle.dumps(x)))

    def out_of_band() -> None:
        buffers: list[pickle.PickleBuffer] = []
        data = pickle.dumps(x, protocol=5, buffer_callback=buffers.append)
        pickle.loads(data, buffers=buffers)

    repeat(300, out_of_band)


def main() -> int:
    parts: list[tuple[str, Callable[[], None]]] = [
        ("numpy exchanges", numpy_exchanges),
        ("host copies", host_copies),
        ("producers with only __dlpack__", dlpack_producers),
        ("pickle", pickles),
    ]
    torch = peer("torch")
    if torch is not None:
        parts.append(("torch", lambda: torch_exchanges(torch)))
    pa = peer("pyarrow")
    if pa is not None:
        parts.append(("pyarrow", lambda: arrow_exchanges(pa)))
    for name, part in parts:
        start = time.perf_counter()
        part()
        print(f"pgo_train: {name}: {time.perf_counter() - start:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
