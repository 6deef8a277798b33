"""Every way out that an error message of dlbridge names works when it is followed.

Each case makes one call fail, checks the exception type and that the message names the way
out, then follows that way out on the same input and checks the result's values. Together
they cover each family of messages: the ``copy=`` and ``device=`` keywords, ``max_version``,
Arrow nulls, byte order, read-only data, torch state DLPack cannot carry, objects with no
protocol, producers that refuse, consumed capsules and the ``stream`` argument.
"""

from __future__ import annotations

import pickle
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import dlbridge
from dlb_testing import require_sycl
from dlpack_ctypes import FakeManagedTensor


@dataclass
class WayOut:
    """``fail()`` raises ``exc`` with ``says`` in its message; ``follow()`` then returns values
    equal to ``expected``."""

    fail: Callable[[], Any]
    exc: type[BaseException]
    says: str
    follow: Callable[[], Any]
    expected: Any


def _values(x: Any) -> list:
    return np.asarray(dlbridge.to_numpy(x)).tolist()


# ------------------------------------------------------------------------------ the families


def no_protocol() -> WayOut:
    x = [1.0, 2.0]
    return WayOut(lambda: dlbridge.from_dlpack(x), dlbridge.NoProtocolError, "numpy.asarray",
                  lambda: dlbridge.from_dlpack(np.asarray(x)), [1.0, 2.0])


class LegacyOnly:
    """A producer that speaks DLPack only as old producers do: ``__dlpack__()`` without
    keywords, whatever the consumer asks."""

    def __init__(self, array: Any) -> None:
        self.array = array

    def __dlpack__(self, **_: Any) -> Any:
        return self.array.__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.array.__dlpack_device__()


def every_protocol_refused() -> WayOut:
    # pyarrow refuses a legacy capsule of its immutable tensors (NotImplementedError).
    pa = pytest.importorskip("pyarrow")
    a = np.arange(4.0).reshape(2, 2)
    a.flags.writeable = False
    x = LegacyOnly(pa.Tensor.from_numpy(a))
    try:
        x.__dlpack__()
    except NotImplementedError:
        pass
    else:
        pytest.skip("this pyarrow exports legacy capsules of immutable tensors")
    return WayOut(lambda: dlbridge.from_dlpack(x), BufferError,
                  "convert it with its own library first",
                  lambda: dlbridge.from_dlpack(x.array.to_numpy()), [[0.0, 1.0], [2.0, 3.0]])


def consumed_capsule() -> WayOut:
    a = np.arange(3.0)
    capsule = a.__dlpack__()
    dlbridge.from_dlpack(capsule)
    return WayOut(lambda: dlbridge.from_dlpack(capsule), BufferError, "call __dlpack__() again",
                  lambda: dlbridge.from_dlpack(a.__dlpack__()), [0.0, 1.0, 2.0])


class OneCapsule:
    """A producer that hands out one capsule for every export, as some releases of tvm-ffi do
    with nested outputs: only its first consumer can import it."""

    def __init__(self, array: np.ndarray) -> None:
        self.capsule = array.__dlpack__()

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.capsule


def producer_reused_capsule() -> WayOut:
    x = OneCapsule(np.arange(3.0))
    first = dlbridge.from_dlpack(x)
    return WayOut(lambda: dlbridge.from_dlpack(x), BufferError,
                  "import it once and hand the result to the other consumers",
                  lambda: np.from_dlpack(first), [0.0, 1.0, 2.0])


def newer_max_version() -> WayOut:
    pytest.importorskip("ml_dtypes")  # to read the values back
    fake = FakeManagedTensor(dtype="float8_e4m3fn", shape=(2,), strides=(1,),
                             data=np.zeros(2, np.uint8))
    t = dlbridge.from_dlpack(fake.capsule())
    return WayOut(lambda: t.__dlpack__(max_version=(1, 0)), BufferError,
                  "max_version=(1, 1)",
                  lambda: dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 1))), [0.0, 0.0])


def arrow_nulls() -> WayOut:
    pa = pytest.importorskip("pyarrow")
    x = pa.array([1.0, None, 3.0])
    return WayOut(lambda: dlbridge.from_dlpack(x), BufferError, "fill_null=0",
                  lambda: dlbridge.from_arrow(x, fill_null=0), [1.0, 0.0, 3.0])


def arrow_nulls_with_validity() -> WayOut:
    pa = pytest.importorskip("pyarrow")
    x = pa.array([1.0, None, 3.0])
    return WayOut(lambda: dlbridge.from_dlpack(x), BufferError, "with_validity=True",
                  lambda: dlbridge.from_arrow(x, with_validity=True)[1], [True, False, True])


def arrow_nulls_to_numpy() -> WayOut:
    pa = pytest.importorskip("pyarrow")
    x = pa.array([1, None, 3], type=pa.int64())
    return WayOut(lambda: dlbridge.from_dlpack(x), BufferError, "zero_copy_only=False",
                  lambda: x.to_numpy(zero_copy_only=False)[[0, 2]], [1.0, 3.0])


def byte_order() -> WayOut:
    arr = np.arange(3.0).astype(">f8" if np.little_endian else "<f8")
    return WayOut(lambda: dlbridge.from_dlpack(memoryview(arr)), BufferError,
                  "arr.astype(arr.dtype.newbyteorder('='))",
                  lambda: dlbridge.from_dlpack(arr.astype(arr.dtype.newbyteorder("="))),
                  [0.0, 1.0, 2.0])


def _readonly() -> dlbridge.Tensor:
    a = np.arange(3.0)
    a.flags.writeable = False
    return dlbridge.from_dlpack(a)


def readonly_legacy_max_version() -> WayOut:
    t = _readonly()
    return WayOut(lambda: t.__dlpack__(copy=False), BufferError, "max_version=(1, 0)",
                  lambda: dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0))),
                  [0.0, 1.0, 2.0])


def readonly_legacy_copy() -> WayOut:
    t = _readonly()
    return WayOut(lambda: t.__dlpack__(copy=False), BufferError, "copy=True",
                  lambda: dlbridge.from_dlpack(t.__dlpack__(copy=True)), [0.0, 1.0, 2.0])


def readonly_destination() -> WayOut:
    t = _readonly()
    src = np.full(3, 7.0)

    def follow() -> Any:
        writable = dlbridge.from_dlpack(t, copy=True)
        dlbridge.copyto(writable, src)
        return writable

    return WayOut(lambda: dlbridge.copyto(t, src), BufferError, "copy=True", follow,
                  [7.0, 7.0, 7.0])


def _misaligned() -> np.ndarray:
    raw = np.zeros(8 * 3 + 1, np.uint8)
    a = raw[1:].view(np.float64)
    a[:] = [1.0, 2.0, 3.0]
    return a


def copy_required() -> WayOut:
    a = _misaligned()
    return WayOut(lambda: dlbridge.from_dlpack(a, copy=False), BufferError, "copy=None",
                  lambda: dlbridge.from_dlpack(a, copy=None), [1.0, 2.0, 3.0])


def convert_copy_required() -> WayOut:
    pytest.importorskip("torch")
    x = np.arange(4.0)[::-1]
    return WayOut(lambda: dlbridge.convert(x, "torch", copy=False), BufferError, "copy=False",
                  lambda: dlbridge.convert(x, "torch"), [3.0, 2.0, 1.0, 0.0])


def stream_of_the_wrong_type() -> WayOut:
    t = dlbridge.from_dlpack(np.arange(2.0))
    return WayOut(lambda: t.__dlpack__(stream="default"), TypeError, "None or an int",
                  lambda: dlbridge.from_dlpack(t.__dlpack__(stream=None)), [0.0, 1.0])


def stream_not_valid_for_the_device() -> WayOut:
    t = dlbridge.from_dlpack(np.arange(2.0))
    return WayOut(lambda: t.__dlpack__(stream=5), ValueError, "pass stream=None",
                  lambda: dlbridge.from_dlpack(t.__dlpack__(stream=None)), [0.0, 1.0])


# ----------------------------------------------------------------- torch: state and layouts


def _torch():
    return pytest.importorskip("torch")


def torch_requires_grad() -> WayOut:
    t = _torch().ones(2, requires_grad=True)
    return WayOut(lambda: dlbridge.from_dlpack(t), BufferError, ".detach()",
                  lambda: dlbridge.from_dlpack(t.detach()), [1.0, 1.0])


def torch_conj() -> WayOut:
    torch = _torch()
    t = torch.tensor([1 + 2j]).conj()
    return WayOut(lambda: dlbridge.from_dlpack(t), BufferError, ".resolve_conj()",
                  lambda: dlbridge.from_dlpack(t.resolve_conj()), [1 - 2j])


def torch_neg() -> WayOut:
    t = _torch().tensor([1.0, 2.0])._neg_view()
    return WayOut(lambda: dlbridge.from_dlpack(t), BufferError, ".resolve_neg()",
                  lambda: dlbridge.from_dlpack(t.resolve_neg()), [-1.0, -2.0])


def torch_sparse() -> WayOut:
    t = _torch().sparse_coo_tensor([[1]], [5.0], size=(3,))
    return WayOut(lambda: dlbridge.from_dlpack(t), BufferError, ".to_dense()",
                  lambda: dlbridge.from_dlpack(t.to_dense()), [0.0, 5.0, 0.0])


def torch_sparse_csr() -> WayOut:
    t = _torch().eye(2).to_sparse_csr()
    return WayOut(lambda: dlbridge.Tensor(t), BufferError, ".to_dense()",
                  lambda: dlbridge.Tensor(t.to_dense()), [[1.0, 0.0], [0.0, 1.0]])


def torch_mkldnn() -> WayOut:
    t = _torch().ones(2).to_mkldnn()
    return WayOut(lambda: dlbridge.to_numpy(t), BufferError, ".to_dense()",
                  lambda: dlbridge.to_numpy(t.to_dense()), [1.0, 1.0])


def torch_nested() -> WayOut:
    torch = _torch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors warn that they are a prototype
        t = torch.nested.nested_tensor([torch.ones(1), torch.ones(2)])
    return WayOut(lambda: dlbridge.from_dlpack(t), BufferError, ".to_padded_tensor(0)",
                  lambda: dlbridge.from_dlpack(t.to_padded_tensor(0)), [[1.0, 0.0], [1.0, 1.0]])


def torch_quantized() -> WayOut:
    torch = _torch()
    t = torch.quantize_per_tensor(torch.tensor([1.0, 2.0]), 0.5, 0, torch.qint8)
    return WayOut(lambda: dlbridge.to_shared(t), BufferError, ".dequantize()",
                  lambda: dlbridge.to_shared(t.dequantize()), [1.0, 2.0])


def torch_quantized_convert() -> WayOut:
    torch = _torch()
    t = torch.quantize_per_tensor(torch.tensor([1.0, 2.0]), 0.5, 0, torch.qint8)
    return WayOut(lambda: dlbridge.convert(t, "numpy"), BufferError, ".dequantize()",
                  lambda: dlbridge.convert(t.dequantize(), "numpy"), [1.0, 2.0])


def torch_nested_convert() -> WayOut:
    torch = _torch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors warn that they are a prototype
        t = torch.nested.nested_tensor([torch.ones(1), torch.ones(2)])
    return WayOut(lambda: dlbridge.convert(t, "numpy"), BufferError, ".to_padded_tensor(0)",
                  lambda: dlbridge.convert(t.to_padded_tensor(0), "numpy"),
                  [[1.0, 0.0], [1.0, 1.0]])


def torch_meta() -> WayOut:
    torch = _torch()
    t = torch.zeros(2, device="meta")

    def follow() -> Any:
        real = torch.empty_like(t, device="cpu")
        real.fill_(4.0)
        return dlbridge.from_dlpack(real)

    return WayOut(lambda: dlbridge.from_dlpack(t), BufferError,
                  'torch.empty_like(t, device="cpu")', follow, [4.0, 4.0])


def torch_sparse_into_copyto() -> WayOut:
    torch = _torch()
    t = torch.sparse_coo_tensor([[0]], [2.0], size=(2,), dtype=torch.float64)
    dst = dlbridge.from_dlpack(np.zeros(2))

    def follow() -> Any:
        dlbridge.copyto(dst, t.to_dense())
        return dst

    return WayOut(lambda: dlbridge.copyto(dst, t), BufferError, ".to_dense()", follow,
                  [2.0, 0.0])


# ------------------------------------------------------------- memory the host cannot read


def _oneapi() -> dlbridge.Tensor:
    dpnp = pytest.importorskip("dpnp")
    require_sycl()
    return dlbridge.from_dlpack(dpnp.arange(3.0))


def device_host_access() -> WayOut:
    t = _oneapi()
    return WayOut(lambda: t.tolist(), BufferError, 'device="cpu"',
                  lambda: dlbridge.from_dlpack(t, device="cpu"), [0.0, 1.0, 2.0])


def device_host_access_to_device() -> WayOut:
    t = _oneapi()
    return WayOut(lambda: memoryview(t), BufferError, 'to_device("cpu")',
                  lambda: memoryview(t.to_device("cpu")), [0.0, 1.0, 2.0])


def device_pickle() -> WayOut:
    t = _oneapi()
    return WayOut(lambda: pickle.dumps(t), BufferError, 't.to_device("cpu")',
                  lambda: pickle.loads(pickle.dumps(t.to_device("cpu"))), [0.0, 1.0, 2.0])


def device_pickle_from_dlpack() -> WayOut:
    dpnp = pytest.importorskip("dpnp")
    require_sycl()
    x = dpnp.arange(3.0)
    t = dlbridge.from_dlpack(x)
    return WayOut(lambda: pickle.dumps(t), BufferError, 'dlbridge.from_dlpack(x, device="cpu")',
                  lambda: pickle.loads(pickle.dumps(dlbridge.from_dlpack(x, device="cpu"))),
                  [0.0, 1.0, 2.0])


FAMILIES: dict[str, Callable[[], WayOut]] = {
    f.__name__: f
    for f in (
        no_protocol, every_protocol_refused, consumed_capsule, producer_reused_capsule,
        newer_max_version, arrow_nulls,
        arrow_nulls_with_validity, arrow_nulls_to_numpy, byte_order, readonly_legacy_max_version,
        readonly_legacy_copy, readonly_destination, copy_required, convert_copy_required,
        stream_of_the_wrong_type, stream_not_valid_for_the_device, torch_requires_grad,
        torch_conj, torch_neg, torch_sparse, torch_sparse_csr, torch_mkldnn, torch_nested,
        torch_quantized, torch_quantized_convert, torch_nested_convert, torch_meta,
        torch_sparse_into_copyto, device_host_access, device_host_access_to_device,
        device_pickle, device_pickle_from_dlpack,
    )
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_the_way_out_an_error_names_works(name):
    case = FAMILIES[name]()
    with pytest.raises(case.exc) as info:
        case.fail()
    assert case.says in str(info.value), str(info.value)
    assert _values(case.follow()) == case.expected
