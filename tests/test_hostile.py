"""Hostile input: a table of malformed inputs, each with its exact exception type
(each failure's exception type, exactly), and hypothesis-generated hostile dicts and capsules.

- ``dlbridge.NoProtocolError`` (a ``TypeError`` and an ``AttributeError``): nothing
  exchangeable (list, int, a capsule that is not a DLPack capsule);
- ``TypeError``: a producer whose ``__dlpack__`` returns something that is not a capsule;
- ``BufferError``: a valid protocol whose data cannot be exchanged (consumed capsules, unknown
  major versions, invalid layouts, NULL strides on 1.2+, unsupported dtypes, byte order,
  misaligned data under ``copy=False``, malformed ``__array_interface__`` /
  ``__cuda_array_interface__`` dicts, Arrow nulls...);
- ``ValueError``: a bad argument value from the caller;
- ``NotImplementedError``: unknown non-None keywords of the Arrow device methods;
- the producer's own exception when its method raises (dlbridge does not mask it).

Every case built on a counting producer also checks that the deleter runs exactly once.
The fuzz targets (``fuzz/``) cover the same parsers at the Rust level; these tests cover the
Python dict and capsule plumbing the fuzzers cannot reach.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import dlbridge
from dlpack_ctypes import FakeManagedTensor, c_strides

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_BASE = np.zeros(4096 // 8, dtype=np.float64)  # 4 KiB, 64-byte aligned (numpy default)
assert _BASE.ctypes.data % 16 == 0


@dataclass
class Case:
    """``call()`` must raise ``exc``; ``fakes`` must each end at exactly one deleter call."""

    call: Callable[[], Any]
    exc: type[BaseException]
    fakes: list[FakeManagedTensor] = field(default_factory=list)
    match: str | None = None
    #: deleter calls each fake ends with: 1, or 0 for capsules without a DLPack name (nobody
    #: may take their pointer, so only their real owner could delete them)
    deletes: int = 1


def _fake(**kw) -> FakeManagedTensor:
    kw.setdefault("shape", (2, 3))
    if "strides" not in kw:
        kw["strides"] = c_strides(kw["shape"])
    if "data_ptr" not in kw:
        kw.setdefault("data", _BASE)
    kw.setdefault("dtype", "float64")
    return FakeManagedTensor(**kw)


def capsule_case(exc, match=None, **kw) -> Callable[[], Case]:
    def build():
        fake = _fake(**kw)
        cap = fake.capsule()
        return Case(lambda: dlbridge.from_dlpack(cap), exc, [fake], match)

    return build


def named_capsule_case(name: bytes, exc) -> Callable[[], Case]:
    def build():
        fake = _fake()
        cap = fake.capsule(name)
        return Case(lambda: dlbridge.from_dlpack(cap), exc, [fake], deletes=0)

    return build


def consumed_twice(versioned: bool) -> Callable[[], Case]:
    def build():
        fake = _fake(versioned=versioned)
        cap = fake.capsule()
        t = dlbridge.from_dlpack(cap)
        del t
        return Case(lambda: dlbridge.from_dlpack(cap), BufferError, [fake], "already consumed")

    return build


def misaligned(copy) -> Callable[[], Case]:
    def build():
        fake = _fake(shape=(4,), byte_offset=1)
        cap = fake.capsule()
        return Case(lambda: dlbridge.from_dlpack(cap, copy=copy), BufferError, [fake])

    return build


class Producer:
    """``__dlpack__`` returns ``make()``; ``__dlpack_device__`` returns ``device()``."""

    def __init__(self, make, device=lambda: (1, 0)):
        self.make = make
        self.device = device

    def __dlpack__(self, **kw):
        return self.make()

    def __dlpack_device__(self):
        return self.device()


def _raise(exc):
    def f(*a, **k):
        raise exc

    return f


def producer_case(make, exc, **kw) -> Callable[[], Case]:
    def build():
        return Case(lambda: dlbridge.from_dlpack(Producer(make), **kw), exc)

    return build


def producer_of_fake(exc, **fake_kw) -> Callable[[], Case]:
    def build():
        fake = _fake(**fake_kw)
        return Case(lambda: dlbridge.from_dlpack(Producer(fake.capsule)), exc, [fake])

    return build


class AI:
    """Offers ``__array_interface__`` = ``d`` (or raises ``d`` if it is an exception)."""

    def __init__(self, d):
        self.d = d
        self.keep = _BASE

    @property
    def __array_interface__(self):
        if isinstance(self.d, BaseException):
            raise self.d
        return self.d


def _good_ai(**changes):
    d = dict(
        version=3,
        shape=(8,),
        typestr="<f8",
        descr=[("", "<f8")],
        data=(_BASE.ctypes.data, False),
        strides=None,
    )
    for k, v in changes.items():
        if v is _DROP:
            d.pop(k)
        else:
            d[k] = v
    return d


_DROP = object()


def ai_case(exc, match=None, **changes) -> Callable[[], Case]:
    def build():
        obj = AI(_good_ai(**changes))
        return Case(lambda: dlbridge.from_dlpack(obj), exc, match=match)

    return build


class CAI:
    def __init__(self, d, hint=None):
        self.d = d
        if hint is not None:
            self.__dlpack_device__ = lambda: hint

    @property
    def __cuda_array_interface__(self):
        return self.d


def cai_case(exc, d) -> Callable[[], Case]:
    def build():
        return Case(lambda: dlbridge.from_dlpack(CAI(d)), exc)

    return build


def _cai(**changes):
    d = {"version": 3, "shape": (4,), "typestr": "<f4", "data": (0x7F00_0000_0000, False)}
    for k, v in changes.items():
        if v is _DROP:
            d.pop(k)
        else:
            d[k] = v
    return d


class ArrowProducer:
    def __init__(self, make):
        self.make = make

    def __arrow_c_array__(self, requested_schema=None):
        return self.make()


def arrow_case(make, exc, match=None) -> Callable[[], Case]:
    def build():
        return Case(lambda: dlbridge.from_dlpack(ArrowProducer(make)), exc, match=match)

    return build


def _pa():
    return pytest.importorskip("pyarrow")


def arrow_consumed_twice() -> Case:
    pair = _pa().array([1.0, 2.0]).__arrow_c_array__()
    dlbridge.from_dlpack(ArrowProducer(lambda: pair))
    return Case(lambda: dlbridge.from_dlpack(ArrowProducer(lambda: pair)), BufferError,
                match="already released")


def tensor_call(fn, exc) -> Callable[[], Case]:
    def build():
        t = dlbridge.from_dlpack(np.arange(4.0))
        return Case(lambda: fn(t), exc)

    return build


def readonly_legacy() -> Case:
    a = np.arange(3.0)
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    return Case(lambda: t.__dlpack__(copy=False), BufferError)  # C13: a legacy request, no copy


def float8_to_old_consumer() -> Case:
    fake = _fake(dtype="float8_e4m3fn", shape=(4,), data=np.zeros(4, np.uint8))
    t = dlbridge.from_dlpack(fake.capsule())
    return Case(lambda: t.__dlpack__(max_version=(1, 0)), BufferError, [fake])  # C26


def producer_wrong_capsule() -> Case:
    fake = _fake()
    producer = Producer(lambda: fake.capsule(b"not_a_dltensor"))
    return Case(lambda: dlbridge.from_dlpack(producer), dlbridge.NoProtocolError, [fake], deletes=0)


TABLE: dict[str, Callable[[], Case]] = {
    # --- not exchangeable: NoProtocolError (a TypeError and an AttributeError)
    "list": lambda: Case(lambda: dlbridge.from_dlpack([1, 2]), dlbridge.NoProtocolError),
    "int": lambda: Case(lambda: dlbridge.from_dlpack(3), dlbridge.NoProtocolError),
    "str": lambda: Case(lambda: dlbridge.from_dlpack("abc"), dlbridge.NoProtocolError),
    "object": lambda: Case(lambda: dlbridge.from_dlpack(object()), dlbridge.NoProtocolError),
    "capsule-other-name": named_capsule_case(b"not_a_dltensor", dlbridge.NoProtocolError),
    "capsule-exchange-api-name": named_capsule_case(b"dlpack_exchange_api",
                                                    dlbridge.NoProtocolError),
    # --- capsules: BufferError
    "capsule-used_dltensor": named_capsule_case(b"used_dltensor", BufferError),
    "capsule-used_dltensor_versioned": named_capsule_case(b"used_dltensor_versioned", BufferError),
    "consumed-twice-versioned": consumed_twice(True),  # C18
    "consumed-twice-legacy": consumed_twice(False),
    "major-2": capsule_case(BufferError, "version 2", version=(2, 0)),  # C17
    "major-0": capsule_case(BufferError, version=(0, 1)),
    "major-max": capsule_case(BufferError, version=(2**32 - 1, 0)),
    "null-strides-1.2": capsule_case(BufferError, "strides is NULL", version=(1, 2), strides=None),
    "null-strides-1.3": capsule_case(BufferError, "strides is NULL", strides=None),  # C7
    "negative-extent": capsule_case(BufferError, "negative", shape=(2, -1), strides=(1, 1)),
    "overflowing-shape": capsule_case(BufferError, shape=(2**40, 2**40), strides=(1, 1)),
    "overflowing-zero-size": capsule_case(BufferError, shape=(0, 2**62, 4), strides=(1, 1, 1)),
    "overflowing-strides": capsule_case(BufferError, strides=(2**63 - 1, 1)),
    "negative-ndim": capsule_case(BufferError, ndim=-3),
    "ndim-1000": capsule_case(BufferError, ndim=1000),
    "null-shape": capsule_case(BufferError, null_shape=True),
    "null-data": capsule_case(BufferError, data_ptr=0),
    "unknown-dtype": capsule_case(BufferError, dtype=(99, 8, 1)),
    "zero-lanes": capsule_case(BufferError, dtype=(2, 32, 0)),
    "misaligned-copy-false": misaligned(False),  # C40
    # --- producers that misbehave
    "producer-raises": producer_case(_raise(RuntimeError("boom")), RuntimeError),
    "producer-raises-buffererror": producer_case(_raise(BufferError("no")), BufferError),
    "producer-returns-int": producer_case(lambda: 7, TypeError),
    "producer-returns-none": producer_case(lambda: None, TypeError),
    "producer-returns-array": producer_case(lambda: np.arange(3.0), TypeError),
    "producer-returns-wrong-capsule": producer_wrong_capsule,
    "producer-returns-major-2": producer_of_fake(BufferError, version=(2, 0)),
    "producer-returns-null-strides": producer_of_fake(BufferError, strides=None),
    "producer-device-raises": lambda: Case(
        lambda: dlbridge.from_dlpack(Producer(lambda: 7, _raise(RuntimeError("dev"))), copy=True),
        RuntimeError,
    ),
    "producer-device-wrong-type": lambda: Case(
        lambda: dlbridge.from_dlpack(Producer(lambda: 7, lambda: "cpu"), device="cpu"),
        TypeError,
    ),
    # --- __array_interface__: BufferError for every malformed dict
    "ai-raises": lambda: Case(lambda: dlbridge.from_dlpack(AI(RuntimeError("x"))), RuntimeError),
    "ai-not-dict": lambda: Case(lambda: dlbridge.from_dlpack(AI([1, 2])), BufferError),
    "ai-version-2": ai_case(BufferError, "version", version=2),
    "ai-shape-missing": ai_case(BufferError, "'shape'", shape=_DROP),
    "ai-shape-list": ai_case(BufferError, "'shape'", shape=[8]),
    "ai-shape-str": ai_case(BufferError, shape=("8",)),
    "ai-shape-negative": ai_case(BufferError, "negative", shape=(-8,)),
    "ai-shape-huge-int": ai_case(BufferError, shape=(2**70,)),
    "ai-shape-overflow": ai_case(BufferError, "overflow", shape=(2**62, 2**62)),
    "ai-typestr-missing": ai_case(BufferError, "'typestr'", typestr=_DROP, descr=_DROP),
    "ai-typestr-int": ai_case(BufferError, typestr=5, descr=_DROP),
    "ai-typestr-unicode": ai_case(BufferError, typestr="<U4", descr=_DROP),
    "ai-typestr-object": ai_case(BufferError, typestr="|O8", descr=_DROP),
    "ai-typestr-garbage": ai_case(BufferError, typestr="\x00\xff", descr=_DROP),
    "ai-byte-order": ai_case(BufferError, "byte order", typestr=">f8", descr=_DROP),
    "ai-long-double": ai_case(BufferError, typestr="<f16", descr=_DROP),
    "ai-data-missing": ai_case(BufferError, "'data'", data=_DROP),
    "ai-data-none": ai_case(BufferError, data=None),
    "ai-data-1-tuple": ai_case(BufferError, data=(_BASE.ctypes.data,)),
    "ai-data-negative": ai_case(BufferError, data=(-16, False)),
    "ai-data-huge": ai_case(BufferError, data=(2**70, False)),
    "ai-data-str": ai_case(BufferError, data=("0x10", False)),
    "ai-data-null": ai_case(BufferError, "NULL", data=(0, False)),
    "ai-data-past-address-space": ai_case(BufferError, data=(2**64 - 16, False)),
    "ai-strides-too-many": ai_case(BufferError, "strides", strides=(8, 8)),
    "ai-strides-too-few": ai_case(BufferError, shape=(2, 4), strides=(32,)),
    "ai-strides-not-multiple": ai_case(BufferError, "multiple", strides=(3,)),
    "ai-strides-str": ai_case(BufferError, strides=("8",)),
    "ai-strides-overflow": ai_case(BufferError, shape=(4,), strides=(2**62,)),
    "ai-mask": ai_case(BufferError, "mask", mask=np.ones(8, bool)),
    "ai-descr-structured": ai_case(BufferError, "structured", descr=[("x", "<f8")]),
    # --- __cuda_array_interface__
    "cai-not-dict": cai_case(BufferError, 5),
    "cai-version-missing": cai_case(BufferError, _cai(version=_DROP)),
    "cai-version-9": cai_case(BufferError, _cai(version=9)),
    "cai-shape-negative": cai_case(BufferError, _cai(shape=(-1,))),
    "cai-typestr-bad": cai_case(BufferError, _cai(typestr="<V8")),
    "cai-data-null": cai_case(BufferError, _cai(data=(0, False))),
    "cai-strides-count": cai_case(BufferError, _cai(strides=(4, 4))),
    "cai-stream-0": cai_case(BufferError, _cai(stream=0)),
    "cai-stream-str": cai_case(BufferError, _cai(stream="s")),
    "cai-mask": cai_case(BufferError, _cai(mask=1)),
    "cai-no-driver": cai_case(BufferError, _cai()),
    # --- Arrow PyCapsule interface
    "arrow-raises": arrow_case(_raise(RuntimeError("a")), RuntimeError),
    "arrow-returns-int": arrow_case(lambda: 3, TypeError),
    "arrow-swapped-capsules": arrow_case(
        lambda: _pa().array([1.0]).__arrow_c_array__()[::-1], TypeError, "arrow_schema"
    ),
    "arrow-dlpack-capsules": arrow_case(
        lambda: (np.arange(2.0).__dlpack__(), np.arange(2.0).__dlpack__()), TypeError
    ),
    "arrow-consumed-twice": arrow_consumed_twice,
    "arrow-strings": lambda: Case(lambda: dlbridge.from_dlpack(_pa().array(["a"])), BufferError),
    "arrow-nulls": lambda: Case(
        lambda: dlbridge.from_dlpack(_pa().array([1.0, None])), BufferError, match="null"
    ),  # C52
    "arrow-dictionary": lambda: Case(
        lambda: dlbridge.from_dlpack(_pa().array(["a", "b"]).dictionary_encode()), BufferError
    ),
    # --- caller arguments: ValueError; exports that cannot be made: BufferError
    "max-version-str": tensor_call(lambda t: t.__dlpack__(max_version="x"), ValueError),
    "max-version-short": tensor_call(lambda t: t.__dlpack__(max_version=(1,)), ValueError),
    "stream-on-cpu": tensor_call(lambda t: t.__dlpack__(stream=5), ValueError),
    "dl-device-str": tensor_call(lambda t: t.__dlpack__(dl_device="cpu"), ValueError),
    "dl-device-unreachable": tensor_call(lambda t: t.__dlpack__(dl_device=(99, 0)), BufferError),
    "copy-order-K": tensor_call(lambda t: t.copy("K"), ValueError),
    "device-unparseable": lambda: Case(
        lambda: dlbridge.from_dlpack(np.arange(2.0), device="gpu:x"), ValueError
    ),
    "arrow-device-keyword": tensor_call(
        lambda t: t.__arrow_c_device_array__(future=1), NotImplementedError
    ),
    "readonly-legacy-export": readonly_legacy,
    "float8-to-dlpack-1.0": float8_to_old_consumer,
}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_hostile_table(name):
    case = TABLE[name]()
    with pytest.raises(BaseException) as info:
        case.call()
    if isinstance(info.value, pytest.skip.Exception):
        raise info.value  # a peer the case needs is missing (pyarrow for the Arrow cases)
    # The exact type, not a subclass or a different one (pytest.raises would accept
    # subclasses).
    assert type(info.value) is case.exc, f"{name}: {type(info.value).__name__}: {info.value}"
    if case.match:
        assert case.match in str(info.value), str(info.value)
    # Messages say something (what was wrong, and the way out).
    assert str(info.value)
    fakes, deletes = case.fakes, case.deletes
    del case, info  # drop every tensor the case holds
    gc.collect()
    for fake in fakes:
        assert fake.finalize() == deletes, f"{name}: deleter calls"


def test_misaligned_copy_none_realigns():
    fake = _fake(shape=(4,), byte_offset=1)
    t = dlbridge.from_dlpack(fake.capsule())
    assert t.is_copied and t.data_ptr % 8 == 0
    del t
    assert fake.finalize() == 1


def test_table_cases_that_are_fine():
    """Neighbours of the hostile cases that must be accepted."""
    ok = [
        _good_ai(),
        _good_ai(version=_DROP),
        _good_ai(descr=_DROP),
        _good_ai(strides=(8,)),
        _good_ai(shape=(0,), data=(0, False)),
        _good_ai(shape=(2, 4), strides=(32, 8)),
        _good_ai(shape=(4,), strides=(-8,), data=(_BASE.ctypes.data + 24, False)),
        _good_ai(data=(_BASE.ctypes.data, "truthy")),
    ]
    for d in ok:
        t = dlbridge.from_dlpack(AI(d))
        assert t.shape == d["shape"]


# --------------------------------------------------------------------------------------------
# hypothesis: hostile dicts (the __array_interface__ / __cuda_array_interface__ parsers)
# --------------------------------------------------------------------------------------------
_TYPESTRS = ["<f8", "<f4", "<f2", "|u1", "|i1", "|b1", "<i8", "<u2", "<c8", "<c16", ">f8",
             "<f16", "|V8", "<U4", "|O8", "<M8", "", "<", "<f", "f8", "<i3", "<b2", "=f8"]


def _ints():
    return st.one_of(
        st.integers(min_value=0, max_value=6),
        st.integers(min_value=-3, max_value=3),
        st.sampled_from([2**31, 2**32, 2**62, 2**63 - 1, 2**63, 2**64, -(2**63), 2**70]),
    )


def _anything():
    return st.one_of(
        st.none(), st.booleans(), st.integers(), st.text(max_size=5), st.floats(),
        st.lists(st.integers(), max_size=3), st.binary(max_size=4),
    )


def _address():
    base = _BASE.ctypes.data
    # Only addresses that are 16-byte aligned (or refused): dlbridge never reads an accepted
    # tensor here, except to realign a misaligned one, which must not happen outside _BASE.
    return st.one_of(
        st.just(0),
        st.integers(min_value=0, max_value=255).map(lambda k: base + 16 * k),
        st.sampled_from([-1, -16, 2**63, 2**64 - 16, 2**64, 2**70]),
        _anything(),
    )


def _maybe(strategy):
    return st.one_of(st.just(_DROP), strategy)


@st.composite
def _array_interface(draw):
    shape = draw(st.one_of(st.tuples(), st.lists(_ints(), max_size=4).map(tuple), _anything()))
    ndim = len(shape) if isinstance(shape, tuple) else 1
    d = {
        "version": draw(_maybe(st.one_of(st.just(3), _anything()))),
        "shape": draw(_maybe(st.just(shape))),
        "typestr": draw(_maybe(st.one_of(st.sampled_from(_TYPESTRS), _anything()))),
        "data": draw(_maybe(st.one_of(
            st.tuples(_address(), st.booleans()), _anything(), st.tuples(_address())
        ))),
        "strides": draw(_maybe(st.one_of(
            st.none(),
            st.lists(
                st.integers(min_value=-4, max_value=4).map(lambda s: 16 * s)
                | st.sampled_from([3, 2**62, -(2**62), 2**63 - 1]),
                min_size=ndim, max_size=ndim,
            ).map(tuple),
            st.lists(st.integers(min_value=-64, max_value=64), max_size=5).map(tuple),
            _anything(),
        ))),
        "descr": draw(_maybe(st.one_of(
            st.just([("", "<f8")]), st.just([("x", "<f8"), ("y", "<i4")]), _anything()
        ))),
        "mask": draw(_maybe(st.one_of(st.none(), _anything()))),
    }
    return {k: v for k, v in d.items() if v is not _DROP}


@settings(max_examples=600)
@given(_array_interface())
def test_hypothesis_array_interface_dicts(d):
    try:
        t = dlbridge.from_dlpack(AI(d))
    except BufferError:
        return
    except BaseException as e:  # noqa: BLE001
        pytest.fail(f"{type(e).__name__}: {e} for {d!r}")
    # Accepted: it must say exactly what the dict said (the memory itself is never read).
    assert t.shape == tuple(d["shape"])
    assert t.readonly == bool(d["data"][1])
    assert t.data_ptr == d["data"][0]


@st.composite
def _cuda_array_interface(draw):
    d = draw(_array_interface())
    if draw(st.booleans()):
        d["version"] = draw(st.sampled_from([0, 1, 2, 3]))
    if draw(st.booleans()):
        d["stream"] = draw(st.one_of(st.none(), st.integers(-2, 3), _anything()))
    return d


@settings(max_examples=400)
@given(_cuda_array_interface(), st.sampled_from([None, (2, 0), (2, 1), (13, 0), (3, 0)]))
def test_hypothesis_cuda_array_interface_dicts(d, hint):
    # No CUDA here: a non-zero address needs the driver (or the producer's hint) to find its
    # device; either way nothing is dereferenced.
    try:
        t = dlbridge.from_dlpack(CAI(d, hint))
    except BufferError:
        return
    except BaseException as e:  # noqa: BLE001
        pytest.fail(f"{type(e).__name__}: {e} for {d!r}")
    assert t.shape == tuple(d["shape"])
    assert t.device.type != 1


# --------------------------------------------------------------------------------------------
# hypothesis: hostile capsules (the Python twin of the dlpack_import fuzz target)
# --------------------------------------------------------------------------------------------
@st.composite
def _capsule_fields(draw):
    int64 = _ints().filter(lambda n: -(2**63) <= n < 2**63)  # what a C struct can hold
    shape = draw(st.lists(int64, max_size=5).map(tuple))
    strides = draw(st.one_of(
        st.none(),
        st.lists(st.integers(-8, 8) | st.sampled_from([2**62, -(2**62), 2**63 - 1]),
                 min_size=len(shape), max_size=len(shape)).map(tuple),
    ))
    ndim = draw(st.one_of(st.just(None), st.sampled_from([-1, -(2**31), 65, 2**31 - 1])))
    return dict(
        shape=shape,
        strides=strides,
        ndim=ndim,
        versioned=draw(st.booleans()),
        version=(draw(st.sampled_from([1, 1, 1, 0, 2])), draw(st.integers(0, 5))),
        dtype=draw(st.one_of(
            st.sampled_from(["float32", "float64", "int8", "uint16", "bool", "complex128",
                             "bfloat16", "float8_e4m3fn"]),
            st.tuples(st.integers(0, 20), st.sampled_from([0, 1, 4, 6, 8, 16, 32, 64, 128]),
                      st.sampled_from([0, 1, 2, 4])),
        )),
        flags=draw(st.integers(0, 2**64 - 1)),
        # 16-aligned addresses only (see _address): NULL, inside _BASE, or wild.
        data_ptr=draw(st.one_of(
            st.just(0),
            st.integers(0, 200).map(lambda k: _BASE.ctypes.data + 16 * k),
            st.sampled_from([2**63, 2**64 - 16, 16]),
        )),
        byte_offset=draw(st.one_of(st.integers(0, 16).map(lambda k: 16 * k),
                                   st.sampled_from([2**63, 2**64 - 16]))),
        null_shape=draw(st.booleans()) and draw(st.booleans()),
        device=draw(st.sampled_from([(1, 0), (1, 0), (2, 0), (14, 0), (99, 3)])),
    )


@settings(max_examples=600)
@given(_capsule_fields(), st.sampled_from([None, False]))
def test_hypothesis_capsules(fields, copy):
    fields = dict(fields)
    ndim = fields.pop("ndim")
    if ndim is not None:
        fields["ndim"] = ndim  # refused before shape is read (always out of 0..=64)
    fake = FakeManagedTensor(**fields)
    cap = fake.capsule()
    try:
        t = dlbridge.from_dlpack(cap, copy=copy)
    except BufferError:
        assert fake.deleter_calls == 0
    except BaseException as e:  # noqa: BLE001
        pytest.fail(f"{type(e).__name__}: {e} for {fields!r}")
    else:
        assert t.shape == fields["shape"] and ndim is None
        del t
    assert fake.finalize() == 1
