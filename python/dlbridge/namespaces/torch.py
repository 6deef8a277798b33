"""torch: autograd, conjugate and negative bits, layouts DLPack cannot describe.

Measured peer facts:

- torch 2.15: ``torch.from_dlpack`` asks for ``max_version=(1, 0)`` only (so float8 needs a
  versioned capsule handed over directly, which torch accepts), ignores READ_ONLY (a writable
  alias of read-only memory) and refuses negative strides.
"""

from __future__ import annotations

from .._layout import negative_strides
from .base import CPU, CUDA, FLOAT8, ROCM, Device, ImportRoute, Namespace, State, device_of


class Torch(Namespace):
    name = module = pip = "torch"
    noun = "tensor"
    aliases = ("torch",)
    rank = 2
    alias_readonly = False
    readonly_why = (
        "torch tensors cannot be read-only (torch.from_dlpack ignores the READ_ONLY flag and "
        "hands out a writable alias)"
    )
    result = "torch.Tensor"
    routes = {
        "capsule": ImportRoute(
            "torch.from_dlpack of a DLPack 1.3 capsule (torch asks for 1.0, which has no "
            "float8; zero-copy)"
        ),
    }
    # autograd and the conjugate / negative bits make torch's own export refuse
    reads_own_facts = True

    def facts(self, x):
        if x.device.type == "meta":
            raise RuntimeError("a meta tensor has no data")
        return {
            "kind": "torch.Tensor",
            "device": Device("cpu") if x.device.type == "cpu" else device_of(x) or Device("cpu"),
            "dtype": str(x.dtype).removeprefix("torch."),
            "shape": tuple(x.shape),
            "strides": tuple(x.stride()),
            "itemsize": x.element_size(),
            "readonly": False,
            "data_ptr": int(x.data_ptr()),
        }

    def owns(self, x):
        torch = self.loaded()
        return torch is not None and isinstance(x, torch.Tensor) and not self._export_only(x)

    def _export_only(self, x) -> bool:
        """torch 2.15's ``ReadOnlyTensorWrapper``: a tensor that allows nothing but its
        read-only DLPack export, so it is taken as any DLPack producer is."""
        import torch.utils.dlpack

        return type(x) is getattr(torch.utils.dlpack, "ReadOnlyTensorWrapper", None)

    def device(self, x):
        if x.device.type == "cpu":
            return Device("cpu")
        return device_of(x)

    def state(self, x):
        torch = self.load()
        if x.is_nested:
            return [State("is nested (its rows have different lengths)",
                          ".to_padded_tensor(0) or .unbind()", None, 0, None, refuse=True)]
        if x.layout != torch.strided:
            return [State(
                f"is {str(x.layout).removeprefix('torch.')} (DLPack describes strided memory only)",
                ".to_dense()", None, 0, None, refuse=True,
            )]
        if x.is_quantized:
            return [State(f"is quantized ({str(x.dtype).removeprefix('torch.')})",
                          ".dequantize() (or .int_repr() for the stored integers)", None, 0, None,
                          refuse=True)]
        if x.device.type == "meta":
            return [State("is on the meta device (it has no data)",
                          'torch.empty_like(t, device="cpu")', None, 0, None,
                          refuse=True)]
        out = []
        if x.requires_grad:
            out.append(State(
                "requires grad",
                ".detach() (no copy; the result is not tracked by autograd)",
                "detach", 0, lambda v: v.detach(),
            ))
        if x.is_conj():
            out.append(State(
                "has its conjugate bit set (a lazy view: its bytes hold the unconjugated values)",
                ".resolve_conj() (a copy)", "resolve", 1, lambda v: v.resolve_conj(),
            ))
        if x.is_neg():
            out.append(State(
                "has its negative bit set (a lazy view: its bytes hold the un-negated values)",
                ".resolve_neg() (a copy)", "resolve", 1, lambda v: v.resolve_neg(),
            ))
        return out

    def to_host(self, x):
        return x if x.device.type == "cpu" else x.cpu()

    def devices(self):
        torch = self.load()
        out = [Device("cpu")]
        if torch.cuda.is_available():
            kind = "rocm" if getattr(torch.version, "hip", None) else "cuda"
            out += [Device(f"{kind}:{i}") for i in range(torch.cuda.device_count())]
        return out

    def can_hold(self, device):
        if device.type == CPU:
            return True
        return any(d == device for d in self.devices())

    def dtype_route(self, dtype):
        torch = self.load()
        dt = getattr(torch, dtype, None)
        if not isinstance(dt, torch.dtype):
            return f"refuse: torch {torch.__version__} has no {dtype} dtype"
        if dtype == "bcomplex32":  # torch has the dtype, but its DLPack code refuses it
            return f"refuse: torch {torch.__version__} takes no bcomplex32 through DLPack"
        if dtype.startswith(FLOAT8):
            return "capsule"  # torch asks for DLPack 1.0; float8 needs 1.1: hand it a capsule
        return "dlpack"

    def layout_problem(self, t):
        if negative_strides(t.shape, t.strides):
            return "torch tensors cannot have negative strides (torch.from_dlpack refuses them)"
        return None

    def from_tensor(self, t, route):
        torch = self.load()
        if route == "capsule":
            return torch.from_dlpack(t.__dlpack__(max_version=(1, 3)))
        return torch.from_dlpack(t)

    def from_host(self, t, device, route):
        torch = self.load()
        name = "cuda" if device.type in (CUDA, ROCM) else device.name
        return self.from_tensor(t, route).to(torch.device(f"{name}:{device.id}"))


__all__ = ["Torch"]
