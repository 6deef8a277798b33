"""Every error message docs/errors.md quotes is one dlbridge raises, under the exception type
the page files it under.

The page quotes messages in tables whose first column is "message begins with", one section
per exception type (``## BufferError`` ...); a cell may quote several, separated by `` / ``,
and ``…`` stands for any text. Each quote is either raised here, by a call in ``RAISE`` that
makes it, or, where this machine cannot make it (a CUDA driver's refusal, device memory, a
failed allocation), found in dlbridge's source as the beginning of a message (``BY_SOURCE``,
each with the reason). A quote in neither, or an entry the page no longer quotes, fails: a
changed message or a changed page shows here."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dlbridge
from dlpack_ctypes import FakeManagedTensor

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "errors.md"
EXCEPTIONS = {"BufferError": BufferError, "TypeError": TypeError, "ValueError": ValueError}


def quoted() -> dict[str, str]:
    """quote → the exception section it is filed under."""
    out: dict[str, str] = {}
    for title, body in re.findall(r"^## (\w+)\n(.*?)(?=^## |\Z)", PAGE.read_text(), re.S | re.M):
        if "| message begins with |" not in body:
            continue
        for line in body.splitlines():
            if line.startswith("| `"):
                for quote in re.findall(r"`([^`]+)`", line.split(" | ")[0]):
                    assert quote not in out, f"quoted twice: {quote}"
                    out[quote] = title
    return out


def pattern(quote: str) -> re.Pattern[str]:
    """The quote as a pattern for the beginning of a message: ``…`` is any text."""
    return re.compile(".*?".join(re.escape(part) for part in quote.split("…")), re.S)


# ------------------------------------------------------------------ calls that raise them


def _torch() -> Any:
    return pytest.importorskip("torch")


def _pa() -> Any:
    return pytest.importorskip("pyarrow")


def _readonly() -> dlbridge.Tensor:
    a = np.arange(3.0)
    a.flags.writeable = False
    return dlbridge.from_dlpack(a)


class _Refuses:
    def __dlpack__(self, **_: Any) -> Any:
        raise NotImplementedError("not this protocol")

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def _consumed() -> None:
    capsule = np.arange(3.0).__dlpack__()
    dlbridge.from_dlpack(capsule)
    dlbridge.from_dlpack(capsule)


class _OneCapsule:
    """A producer that hands out one capsule for every export."""

    def __init__(self) -> None:
        self.capsule = np.arange(3.0).__dlpack__()

    def __dlpack__(self, **_: Any) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def _reused_capsule() -> None:
    x = _OneCapsule()
    dlbridge.from_dlpack(x)
    dlbridge.from_dlpack(x)


def _fake(**kw: Any) -> Any:
    kw.setdefault("data", np.zeros(4, np.float32))
    kw.setdefault("shape", (4,))
    kw.setdefault("strides", (1,))
    return dlbridge.from_dlpack(FakeManagedTensor(**kw).capsule())


def _misaligned() -> np.ndarray:
    return np.zeros(8 * 3 + 1, np.uint8)[1:].view(np.float64)


def _torch_nested() -> Any:
    torch = _torch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors warn that they are a prototype
        return torch.nested.nested_tensor([torch.ones(1), torch.ones(2)])


class _NotACapsule(_Refuses):
    def __dlpack__(self, **_: Any) -> Any:
        return 42


class _Dtype:
    def __dlpack_data_type__(self) -> Any:
        return "float32"


RAISE: dict[str, Callable[[], Any]] = {
    # BufferError
    "cannot import an object of type …: every protocol it offers refused":
        lambda: dlbridge.from_dlpack(_Refuses()),
    "this DLPack capsule was already consumed": _consumed,
    "….__dlpack__() returned a DLPack capsule that was already consumed": _reused_capsule,
    "DLPack version … is not supported": lambda: _fake(version=(2, 0)),
    "unsupported dtype (code=…, bits=…, lanes=…)": lambda: _fake(dtype=(2, 3, 1)),
    "dtype … needs DLPack 1.… but the consumer asked for …":
        lambda: _fake(dtype="float8_e4m3fn", data=np.zeros(4, np.uint8)).__dlpack__(
            max_version=(1, 0)),
    "unsupported element format …":
        lambda: dlbridge.from_dlpack(memoryview(np.zeros(2, dtype="U1"))),
    "the Arrow array (format …) has … null …, which DLPack cannot represent":
        lambda: dlbridge.from_dlpack(_pa().array([1.0, None])),
    "… has non-native byte order":
        lambda: dlbridge.from_dlpack(memoryview(np.arange(3.0).astype(
            ">f8" if np.little_endian else "<f8"))),
    "invalid layout: …": lambda: _fake(strides=(-1,), shape=(-4,)),
    "the tensor is read-only and a legacy DLPack capsule cannot say so":
        lambda: _readonly().__dlpack__(copy=False),
    "the tensor is read-only; request read-only access or make a copy":
        lambda: dlbridge.copyto(_readonly(), np.zeros(3)),
    "a copy is needed (…) and copying is not allowed":
        lambda: dlbridge.from_dlpack(_misaligned(), copy=False),
    "the torch tensor requires grad":
        lambda: dlbridge.from_dlpack(_torch().ones(2, requires_grad=True)),
    "the torch tensor has its conjugate bit set":
        lambda: dlbridge.from_dlpack(_torch().tensor([1 + 2j]).conj()),
    "the torch tensor has its negative bit set":
        lambda: dlbridge.from_dlpack(_torch().tensor([1.0])._neg_view()),
    "the torch tensor is sparse_coo, which DLPack cannot describe":
        lambda: dlbridge.from_dlpack(_torch().sparse_coo_tensor([[1]], [5.0], size=(3,))),
    "the torch tensor is nested …, which DLPack cannot describe":
        lambda: dlbridge.from_dlpack(_torch_nested()),
    "the torch tensor is quantized …, which DLPack cannot describe":
        lambda: dlbridge.from_dlpack(_torch().quantize_per_tensor(
            _torch().tensor([1.0]), 0.5, 0, _torch().qint8)),
    "the torch tensor is on the meta device (it has no data), which DLPack cannot describe":
        lambda: dlbridge.from_dlpack(_torch().zeros(2, device="meta")),
    "cannot import a NumPy array of ml_dtypes.…: dlbridge has no DLPack dtype for it":
        lambda: dlbridge.from_dlpack(np.zeros(2, pytest.importorskip("ml_dtypes").int4)),
    "tolist() has no Python scalar for …":
        lambda: _fake(dtype="float8_e4m3fn", data=np.zeros(4, np.uint8)).tolist(),
    "a copy is needed (torch tensors cannot have negative strides …) and copying is not allowed":
        lambda: (_torch(), dlbridge.convert(np.arange(3.0)[::-1], "torch", copy=False)),
    # TypeError
    "cannot import an object of type …: it offers none of …":
        lambda: dlbridge.from_dlpack([1, 2]),
    "the capsule is not a DLPack capsule":
        lambda: dlbridge.from_dlpack(_other_capsule()),
    "from_arrow needs an object with the Arrow PyCapsule interface":
        lambda: dlbridge.from_arrow([1, 2]),
    "expected a DLPack capsule, got an object of type …":
        lambda: dlbridge.from_dlpack(_NotACapsule()),
    "stream must be None or an int":
        lambda: dlbridge.from_dlpack(np.arange(2.0)).__dlpack__(stream="default"),
    "fill_null must be a bool, an int or a float":
        lambda: dlbridge.from_arrow(_pa().array([1.0, None]), fill_null="zero"),
    "copy must be None, True or False": lambda: dlbridge.from_dlpack(np.arange(2.0), copy="yes"),
    "type must be a pyarrow.DataType or None":
        lambda: (_pa(), dlbridge.from_dlpack(np.arange(2.0)).__arrow_array__(type=1)),
    "from_dlpack() takes exactly one positional argument":
        lambda: dlbridge.from_dlpack(np.arange(2.0), None),  # type: ignore[misc]
    "len() of a 0-d tensor": lambda: len(dlbridge.from_dlpack(np.float64(1.0))),
    "cannot interpret … as a device":
        lambda: dlbridge.from_dlpack(np.arange(2.0), device=object()),
    "cannot interpret … as a dtype": lambda: dlbridge.DType(object()),
    # ValueError
    "cannot parse device …": lambda: dlbridge.Device("gpu:x"),
    "… invalid device (…)": lambda: dlbridge.Device((0, 0)),
    "… not a (device_type, device_id) tuple": lambda: dlbridge.Device((1, 2, 3)),
    "stream=… is not valid for data on …":
        lambda: dlbridge.from_dlpack(np.arange(2.0)).__dlpack__(stream=5),
    "max_version must be a (major, minor) tuple":
        lambda: dlbridge.from_dlpack(np.arange(2.0)).__dlpack__(max_version=1),
    "unknown dtype name …": lambda: dlbridge.DType("float33"),
    "….__dlpack_data_type__() gave …": lambda: dlbridge.DType(_Dtype()),
    "… has no DLPack dtype that dlbridge knows": lambda: dlbridge.DType(np.dtype("U1")),
    "… is not in native byte order":
        lambda: dlbridge.DType(np.dtype(">f8" if np.little_endian else "<f8")),
    "cannot view … as …": lambda: dlbridge.from_dlpack(np.arange(2.0)).view("int32"),
    "cannot copy …": lambda: dlbridge.copyto(dlbridge.from_dlpack(np.zeros(3)), np.zeros(2)),
    "fill_null=… cannot be stored as …":
        lambda: dlbridge.from_arrow(_pa().array([1, None]), fill_null=0.5),
    "unknown target …": lambda: dlbridge.convert(np.arange(2.0), "nosuchlibrary"),
    "copy must be True, False or None":
        lambda: dlbridge.convert(np.arange(2.0), "numpy", copy="yes"),  # type: ignore[call-overload]
}


def _other_capsule() -> Any:
    """A capsule of another kind than DLPack's: one of PyArrow's schema capsules."""
    return _pa().float64().__arrow_c_schema__()


#: quotes this machine cannot raise: the beginning of a message in dlbridge's source instead
BY_SOURCE: dict[str, str] = {
    "invalid DLPack capsule: its pointer is NULL": "CPython makes no capsule of a NULL pointer",
    "the data is on …, which the host CPU cannot access": "device memory (a GPU, SYCL)",
    "cannot move data from … to …": "a second device",
    "CUDA is not available: …": "a build without the cuda feature, or no CUDA stand-in loaded",
    "the CUDA driver call … failed with …": "a CUDA driver",
    "out of memory allocating … bytes": "an allocation that fails",
    "the tensor is on …, which __arrow_c_array__ cannot hand out": "device memory",
    "the tensor is on …; an Arrow stream hands out CPU memory only": "device memory",
    "the device stream has several chunks on …": "an Arrow device stream on a device",
    "the producer attached a sync event for …": "an Arrow device array with a sync event",
    "cannot wait on the producer's … sync event": "a device's sync event",
}

SOURCE = "\n".join(
    p.read_text(encoding="utf-8")
    for p in [*(REPO / "crates" / "dlbridge" / "src").rglob("*.rs"),
              *(REPO / "python" / "dlbridge").rglob("*.py")]
)


def test_every_quote_is_checked_and_every_check_is_quoted():
    quotes = set(quoted())
    assert len(quotes) > 40
    assert sorted(quotes - RAISE.keys() - BY_SOURCE.keys()) == []
    assert sorted((RAISE.keys() | BY_SOURCE.keys()) - quotes) == []
    assert not RAISE.keys() & BY_SOURCE.keys()


@pytest.mark.parametrize("quote", sorted(RAISE))
def test_quoted_message_is_the_one_raised(quote):
    expected = EXCEPTIONS[quoted()[quote]]
    with pytest.raises(Exception) as info:
        RAISE[quote]()
    assert isinstance(info.value, expected), f"{type(info.value).__name__}: {info.value}"
    assert pattern(quote).match(str(info.value)), str(info.value)


@pytest.mark.parametrize("quote", sorted(BY_SOURCE))
def test_quoted_message_begins_a_message_in_the_source(quote):
    # a message starts a string literal (Rust "…" or Python f"…"); … is any text of that line
    parts = [re.escape(part) for part in quote.split("…")]
    assert re.search('"' + '[^"\n]*?'.join(parts), SOURCE), quote


def test_rust_section_quotes_are_in_the_source():
    # the messages of WritableTensor, quoted from their middle: each piece is in the source
    rust = PAGE.read_text().split("## In Rust", 1)[1]
    quotes = re.findall(r"`(…[^`]+…)`", rust)
    assert len(quotes) == 2
    for quote in quotes:
        parts = [re.escape(part) for part in quote.split("…") if part.strip()]
        assert re.search('[^"\n]*?'.join(parts), SOURCE), quote
