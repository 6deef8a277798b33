"""TensorFlow: legacy capsules only, immutable, C-contiguous tensors."""

from __future__ import annotations

from .._layout import c_contiguous
from .base import BASIC_DTYPES, CPU, Device, Namespace, device_of


class TensorFlow(Namespace):
    """TensorFlow: ``tf.experimental.dlpack`` takes raw legacy capsules only; its tensors are
    immutable and C-contiguous."""

    name = module = "tensorflow"
    noun = "tensor"
    pip = "tensorflow-cpu"
    aliases = ("tensorflow", "tf")
    rank = 6
    importer = "tf.experimental.dlpack.from_dlpack (legacy capsule)"
    alias_readonly = False
    readonly_why = (
        "tf.experimental.dlpack.from_dlpack takes legacy capsules only, which cannot carry "
        "the read-only flag"
    )
    result = "tensorflow.Tensor"

    def owns(self, x):
        tf = self.loaded()
        return tf is not None and isinstance(x, tf.Tensor)

    def device(self, x):
        # C31: where the bytes live; TF keeps int32 tensors in host memory even "on" a GPU,
        # and its DLPack capsule says so.
        return device_of(x) or Device("cpu")

    def source(self, x):
        if hasattr(x, "__dlpack__"):
            return x
        return self.load().experimental.dlpack.to_dlpack(x)

    def to_host(self, x):
        tf = self.load()
        with tf.device("/CPU:0"):
            return tf.identity(x)

    def devices(self):
        tf = self.load()
        gpus = tf.config.list_logical_devices("GPU")
        return [Device("cpu")] + [Device(f"cuda:{i}") for i in range(len(gpus))]

    def can_hold(self, device):
        return device.type == CPU or any(d == device for d in self.devices())

    def dtype_route(self, dtype):
        if dtype in BASIC_DTYPES or dtype == "bfloat16":
            return "dlpack"
        return f"refuse: TensorFlow has no {dtype} dtype"

    def layout_problem(self, t):
        # tf#51598: TensorFlow imports row-major data only
        if t.size and not c_contiguous(t.shape, t.strides):
            return "TensorFlow imports C-contiguous (row-major) data only"
        return None

    def from_tensor(self, t, route):
        return self.load().experimental.dlpack.from_dlpack(t.__dlpack__())


__all__ = ["TensorFlow"]
