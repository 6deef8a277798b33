"""The checker's adapter of TensorFlow."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import refcapsule as rc
from .base import Adapter, Observed, Unsupported, from_capsule_info


class TensorFlowLib(Adapter, library="tensorflow"):
    result_modules = ("tensorflow",)
    readonly_results = True
    takes_kwargs = False
    slow_import = True
    note = ("consumer: tf.experimental.dlpack.from_dlpack of the legacy capsule x.__dlpack__() "
            "(it takes raw capsules only); TensorFlow tensors are immutable and C-contiguous")
    #: distributions that install the ``tensorflow`` module
    dists = ("tensorflow", "tensorflow-cpu", "tf-nightly", "tf-nightly-cpu")

    @staticmethod
    def read_result(y: Any) -> Observed:
        obs = Observed(kind="tensorflow.Tensor")
        info = rc.read_object(y)
        from_capsule_info(obs, info)
        obs.dtype = y.dtype.name
        obs.ptr = info.data_ptr if info.size else None
        obs.device = info.device
        obs.writable = False  # TensorFlow tensors are immutable
        return obs

    def make(self, recipe, ref):
        tf = self.load()
        if not recipe.plain:
            raise Unsupported(
                "TensorFlow tensors have no user-visible layout (always C-contiguous)"
            )
        try:
            dt = tf.as_dtype(ref.dtype)
        except TypeError as e:
            raise Unsupported(f"tensorflow has no dtype {recipe.dtype}") from e
        return tf.constant(np.array(ref, copy=True, order="C"), dtype=dt)

    modes = frozenset({"tf_gpu_scope"})

    def in_mode(self, mode, x, ref):
        """``tf_gpu_scope`` (C31): a tensor created under a GPU device scope (placed on the CPU
        without a GPU)."""
        if mode != "tf_gpu_scope":
            return super().in_mode(mode, x, ref)
        tf = self.load()
        with tf.device("/GPU:0"):
            return tf.constant(np.array(ref, copy=True, order="C")), ref

    def src_readonly(self, x):
        return True  # immutable

    def from_dlpack(self, obj, **kw):
        tf = self.load()
        cap = obj if type(obj).__name__ == "PyCapsule" else obj.__dlpack__()
        return tf.experimental.dlpack.from_dlpack(cap)

    def native_reduce(self, y):
        return complex(self.load().reduce_sum(y).numpy())
