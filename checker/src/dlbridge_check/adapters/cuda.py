"""The checker's adapter of CuPy."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from .base import Adapter, Observed, Unsupported, det_values, dlpack_device, ops_view


class CupyLib(Adapter, library="cupy"):
    """CuPy: needs a CUDA device. Importing it works without one (cupy 14), using it does not:
    discovery runs a device probe in a subprocess and reports the library as not installed, with
    the reason, when the probe fails."""

    result_modules = ("cupy",)
    devices = frozenset({2})
    dists = ("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy")
    note = "cupy.ndarray on CUDA device 0; consumer: cupy.from_dlpack"
    _probe: tuple[bool, str] | None = None  # shared by the instances of one process

    @staticmethod
    def read_result(y: Any) -> Observed:
        obs = Observed(kind="cupy.ndarray")
        obs.dtype = np.dtype(y.dtype).name
        obs.shape = tuple(y.shape)
        obs.writable = True
        obs.device = dlpack_device(y)
        obs.ptr = int(y.data.ptr) if y.size else None
        obs.strides = tuple(s // y.itemsize for s in y.strides) if y.itemsize else None
        obs.values = np.array(y.get(), copy=True, order="C")
        return obs

    def installed(self):
        if not super().installed():
            return False
        return self.probe()[0]

    def probe(self) -> tuple[bool, str]:
        """(usable, why not): import cupy and count the CUDA devices in a subprocess."""
        if CupyLib._probe is None:
            import subprocess

            code = ("import cupy, sys\n"
                    "n = cupy.cuda.runtime.getDeviceCount()\n"
                    "cupy.arange(2).sum()\n"
                    "print(n)\n")
            try:
                proc = subprocess.run(
                    [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
                )
            except subprocess.TimeoutExpired:
                CupyLib._probe = (False, "importing cupy and counting CUDA devices took over 120 s")
            else:
                if proc.returncode == 0:
                    CupyLib._probe = (True, "")
                else:
                    lines = [
                        x.strip() for x in (proc.stderr or "").strip().splitlines() if x.strip()
                    ]
                    last = lines[-1] if lines else f"exit status {proc.returncode}"
                    CupyLib._probe = (
                        False,
                        f"installed, but not usable here (no CUDA device?): {last[:200]}",
                    )
        return CupyLib._probe

    def setup(self):
        self._mod.cuda.runtime.getDeviceCount()

    def make(self, recipe, ref):
        cp = self.load()
        if recipe.dtype == "bfloat16" or recipe.dtype.startswith("float8"):
            raise Unsupported(f"cupy has no {recipe.dtype}")
        if recipe.readonly:
            raise Unsupported("cupy arrays cannot be read-only")
        if any(op[0] in ("misalign", "shift8") for op in recipe.ops):
            raise Unsupported("not expressible with cupy (it allocates its own memory)")
        base = det_values(recipe.dtype, recipe.shape, recipe.order)
        x = cp.asarray(base)
        if recipe.order == "F":
            x = cp.asfortranarray(x)
        return ops_view(x, recipe, transpose=lambda v: v.T, index=lambda v, ix: v[ix],
                         broadcast=lambda v, shape: cp.broadcast_to(v, shape))

    def src_ptr(self, x):
        return int(x.data.ptr)

    def src_device(self, x):
        return (2, int(x.device.id))

    def device_arg(self, which):
        raise Unsupported("cupy.from_dlpack's device= is not exercised by the checker")

    def from_dlpack(self, obj, **kw):
        return self.load().from_dlpack(obj, **kw)

    def native_reduce(self, y):
        return complex(self.load().sum(y).get())
