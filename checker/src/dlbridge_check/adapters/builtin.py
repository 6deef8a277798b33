"""The checker's built-in libraries: Python's memoryview (buffer protocol) and the reference
DLPack producer and consumer. Always available; no namespace."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from .. import refcapsule as rc
from .base import Adapter, RefResult, Unsupported


class PythonLib(Adapter):
    """Python's own objects: a memoryview over the data (buffer protocol), and lists."""

    name = "python"
    module = "sys"
    rank = 17
    builtin = True
    consumer = False
    note = ("memoryview (buffer protocol, no DLPack): what dlbridge imports that DLPack "
            "consumers cannot")

    def version(self):
        return sys.version.split()[0]

    def make(self, recipe, ref):
        if recipe.dtype == "bfloat16" or recipe.dtype.startswith("float8"):
            raise Unsupported(f"no buffer-protocol format for {recipe.dtype}")
        return memoryview(ref)

    def src_readonly(self, x):
        return bool(getattr(x, "readonly", False))

    def src_ptr(self, x):
        return np.asarray(x).__array_interface__["data"][0] if isinstance(x, memoryview) else None


class RefLib(Adapter):
    """The checker's own reference DLPack producer and consumer (ctypes)."""

    name = "dlpack-ref"
    module = "ctypes"
    rank = 18
    builtin = True
    readonly_results = True
    note = "reference DLPack producer/consumer in ctypes: checks every field of a capsule"

    def version(self):
        return "DLPack {}.{}".format(*rc.REF_VERSION)

    def make(self, recipe, ref):
        return rc.RefArray(ref, readonly=recipe.readonly)

    def src_readonly(self, x):
        return x.readonly if isinstance(x, rc.RefArray) else False

    def src_ptr(self, x):
        return x.data_ptr if isinstance(x, rc.RefArray) else None

    def src_device(self, x):
        return x.__dlpack_device__() if isinstance(x, rc.RefArray) else (1, 0)

    def device_arg(self, which):
        if which in ("cpu", "native"):
            return (1, 0)
        return super().device_arg(which)

    def consume(self, obj, *, device=None, copy=None):
        kw: dict[str, Any] = {}
        if device is not None:
            kw["dl_device"] = self.device_arg(device)
        if copy is not None:
            kw["copy"] = copy
        return ref_consume(obj, **kw)


def ref_consume(obj: Any, **kw: Any) -> RefResult:
    """The reference consumer: read the capsule, note every spec violation."""
    info = rc.read_object(obj, **kw)
    problems = []
    if info.versioned and info.version is not None and info.version > rc.REF_VERSION:
        problems.append(
            f"capsule version {info.version} is newer than the "
            f"max_version {rc.REF_VERSION} asked for"
        )
    code = info.code_bits_lanes[0]
    if code in rc.CODES_SINCE_1_1:
        # C26: the same dtype must be refused to a DLPack 1.0 consumer
        try:
            cap = obj.__dlpack__(max_version=(1, 0))
        except BufferError:
            pass
        except Exception as e:  # noqa: BLE001
            problems.append(
                f"asked for a {info.dtype} capsule with max_version=(1, 0), it raised "
                f"{type(e).__name__} instead of BufferError"
            )
        else:
            try:
                got = rc.read_capsule(cap, read_values=False)
                if got.code_bits_lanes[0] in rc.CODES_SINCE_1_1:
                    problems.append(
                        f"exported {info.dtype} (a DLPack 1.1 type code) "
                        f"to a consumer that asked for "
                        f"max_version=(1, 0); expected BufferError"
                    )
            except Exception:  # noqa: BLE001
                pass
    return RefResult(info, problems)
