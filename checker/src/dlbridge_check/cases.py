"""The checker's cases: what it exchanges, between which libraries, expecting what.

Every case names the entries of dlbridge's catalog of real-world cases (C1 and up,
:mod:`dlbridge_check.catalog`) it exercises in ``refs``. Features group cases for the
report's colour matrices. A case says how the source is built (a :class:`Recipe`: dtype, shape,
order, view operations, read-only), what is passed to ``from_dlpack`` (``copy=``, ``device=``),
how the array is handed over (``mode``: the array itself, a wrapper that forces legacy capsules,
a capsule consumed twice, a raw capsule, a Python list, a deliberately broken capsule) and, when
the only right answer is a refusal, why (``refuse``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .libraries import Recipe

S = slice


@dataclass(frozen=True)
class Case:
    id: str
    feature: str
    title: str
    refs: tuple[str, ...] = ()
    recipe: Recipe = Recipe()
    copy: bool | None = None
    device: str | None = None  # None | "cpu" | "native" (the consumer's own default device)
    mode: str = "array"
    producers: tuple[str, ...] | None = None  # None: every producer
    consumers: tuple[str, ...] | None = None  # None: every consumer
    refuse: str | None = None  # the reason a BufferError is the only right answer
    expect_type_error: bool = False
    reduce: bool = False
    strict_strides: bool = False  # C10: strides of the extent > 1 dims must be the C strides
    #: why a direct refusal is a finding against the peers (they have what the exchange needs)
    peers_can: str | None = None
    #: why a BufferError from the consumer is a finding against it (what it gets is valid)
    must_accept: str | None = None
    #: the judge of the consumer audit (:mod:`dlbridge_check.consumers`) that runs the case's
    #: units instead of the ordinary routes
    judge: str | None = None


FEATURES = {
    "dtype": "element types",
    "layout": "memory layouts",
    "readonly": "read-only sources",
    "copy": "copy=True / copy=False",
    "device": "device= and cross-device",
    "capsule": "capsule versions and reuse",
    "input": "inputs without __dlpack__",
    "hostile": "broken capsules (reference producer)",
    "torch": "torch-only flags",
    "producer": "what __dlpack__ hands out (read by the reference consumer)",
}

DTYPES = [
    ("bool", ("C24",)),
    ("int8", ()),
    ("int16", ()),
    ("int32", ()),
    ("int64", ()),
    ("uint8", ()),
    ("uint16", ("C27",)),
    ("uint32", ("C27",)),
    ("uint64", ()),
    ("float16", ()),
    ("float32", ()),
    ("float64", ()),
    ("bfloat16", ("C25", "C30")),
    ("complex64", ()),
    ("complex128", ()),
    ("float8_e4m3fn", ("C26",)),
    ("float8_e5m2", ("C26",)),
    # kDLBcomplex (two bfloat16 halves), added to the header after DLPack 1.3
    ("bcomplex32", ()),
]


F64 = "float64"
#: the default source: a C-contiguous (3, 4) float64 array
PLAIN = Recipe()


def _case(case_id: str, title: str, refs: tuple[str, ...] = (), recipe: Recipe = PLAIN,
          **options: Any) -> Case:
    """One row of the table: the feature is the part of the id before the slash."""
    return Case(case_id, case_id.split("/")[0], title, refs, recipe, **options)


def _ix(dtype: str, shape: tuple[int, ...], *index: slice, readonly: bool = False) -> Recipe:
    """A view ``x[index]`` of a C-ordered array."""
    return Recipe(dtype, shape, ops=(("ix", index),), readonly=readonly)


#: the sources several rows share
TRANSPOSED = Recipe(F64, (3, 4), ops=(("T",),))
NEG_COLS = _ix(F64, (3, 4), S(None), S(None, None, -1))
STEP_2D = _ix(F64, (4, 6), S(None, None, 2), S(None, None, 3))
MISALIGNED = Recipe(F64, (6,), ops=(("misalign",),))
READ_ONLY = Recipe(F64, (3, 4), readonly=True)
RO_REFS = ("C12", "C14", "C15", "C16")
LEGACY_READ_ONLY = "a legacy capsule cannot say read-only, so the producer must refuse it or " \
    "hand out a copy (C13)"
REF = ("dlpack-ref",)

#: (name, title, refs, recipe) of the layout/ cases
LAYOUTS: list[tuple[str, str, tuple[str, ...], Recipe]] = [
    ("contiguous", "C-contiguous (3, 4)", (), PLAIN),
    ("transposed", "transposed (4, 3) view", (), TRANSPOSED),
    ("fortran", "Fortran-ordered (4, 250) float32", ("C3",), Recipe("float32", (4, 250), "F")),
    ("neg_cols", "x[:, ::-1] (negative column stride)", ("C1",), NEG_COLS),
    ("neg_rows", "x[::-1] (negative row stride)", ("C1",), _ix(F64, (4, 3), S(None, None, -1))),
    ("flip_1d", "flip of a 1-D array", ("C2",), _ix(F64, (10,), S(None, None, -1))),
    ("step_1d", "x[::2] (step slice)", (), _ix(F64, (12,), S(None, None, 2))),
    ("step_2d", "x[::2, ::3]", (), STEP_2D),
    ("offset_1d", "x[3:] (offset)", (), _ix(F64, (10,), S(3, None))),
    ("offset_2d", "x[1:, 2:] (offset, not contiguous)", (),
     _ix(F64, (4, 6), S(1, None), S(2, None))),
    ("scalar_0d", "0-d array", ("C8",), Recipe(F64, ())),
    ("zero_size", "zero-size (0, 3)", ("C9",), Recipe(F64, (0, 3))),
    ("zero_size_wide", "zero-size (0, 2048)", ("C10",), Recipe("float32", (0, 2048))),
    ("zero_size_strided", "zero-size (0, 3) view with steps (contiguous all the same)", ("C57",),
     _ix(F64, (0, 6), S(None), S(None, None, 2))),
    ("size1_column", "(1024, 1) column-major float32 (a size-1 dimension's stride)", ("C59",),
     Recipe("float32", (1024, 1), "F")),
    ("size1_dims", "(3, 1, 6, 2) float32, then a reduction", ("C5",),
     Recipe("float32", (3, 1, 6, 2))),
    ("size1_leading", "(1, 3, 224, 224) float32 (is C-contiguous)", ("C4",),
     Recipe("float32", (1, 3, 224, 224))),
    ("zero_stride", "broadcast view (stride 0)", (),
     Recipe(F64, (4,), ops=(("broadcast", (3, 4)),))),
    ("misaligned", "float64 data at an odd address", ("C40",), MISALIGNED),
]

#: every case after the dtype/ and layout/ rows, in the order of the reports
ROWS: list[Case] = [
    _case("layout/misaligned_copy_false", "misaligned float64 data with copy=False", ("C40",),
          MISALIGNED, copy=False),
    _case("readonly/contiguous", "read-only (3, 4) array", RO_REFS, READ_ONLY),
    _case("readonly/1d", "read-only 1-D array", RO_REFS, Recipe(F64, (12,), readonly=True)),
    _case("readonly/strided", "read-only x[::2, ::3] view", RO_REFS,
          _ix(F64, (4, 6), S(None, None, 2), S(None, None, 3), readonly=True)),
    _case("readonly/copy_false", "read-only array with copy=False", RO_REFS, READ_ONLY, copy=False),
    _case("readonly/copy_true", "read-only array with copy=True", RO_REFS, READ_ONLY, copy=True),
    _case("copy/true", "copy=True of a contiguous array", copy=True),
    _case("copy/false", "copy=False of a contiguous array", copy=False),
    _case("copy/true_transposed", "copy=True of a transposed view", (), TRANSPOSED, copy=True),
    _case("copy/false_transposed", "copy=False of a transposed view", (), TRANSPOSED, copy=False),
    _case("copy/false_neg", "copy=False of x[:, ::-1]", ("C1",), NEG_COLS, copy=False),
    _case("copy/true_1d", "copy=True of a 1-D array", (), Recipe(F64, (12,)), copy=True),
    _case("copy/false_not64", "copy=False of data 8 bytes past a 64-byte boundary", ("C40",),
          Recipe(F64, (12,), ops=(("shift8",),)), copy=False),
    _case("device/cpu", 'device="cpu"', ("C37",), device="cpu"),
    _case("device/cpu_1d", 'device="cpu" of a 1-D array', ("C37",), Recipe(F64, (12,)),
          device="cpu"),
    _case("device/cpu_copy_false", 'device="cpu", copy=False', ("C39",), device="cpu",
          copy=False),
    _case("device/cpu_copy_true", 'device="cpu", copy=True', ("C37",), device="cpu", copy=True),
    _case("device/consumer", "device= the consumer's own default device", ("C38",),
          device="native"),
    _case("device/other_device",
          "data on a non-CPU device, no device= (a CPU consumer must refuse with a hint)",
          ("C36",), producers=("dpnp", "cupy")),
    _case("device/tf_gpu_scope",
          "TensorFlow int32 tensor created under a GPU device scope (must report where its bytes "
          "are)", ("C31",), Recipe("int32", (3,)), mode="tf_gpu_scope",
          producers=("tensorflow",)),
    _case("device/strided_cpu", 'device="cpu" of x[::2, ::3]', ("C37",), STEP_2D, device="cpu"),
    _case("capsule/legacy", "producer forced to send a legacy (unversioned) capsule", ("C46",),
          mode="legacy"),
    _case("capsule/legacy_readonly", "read-only array asked for a legacy capsule", ("C13",),
          READ_ONLY, mode="legacy", refuse=LEGACY_READ_ONLY),
    _case("capsule/versioned", "which capsule version the consumer asks for", ("C12", "C58"),
          mode="versioned"),
    _case("capsule/consumed", "the same capsule handed over twice", ("C18",), mode="consumed"),
    _case("capsule/raw_versioned", "a raw versioned capsule instead of an array", ("C46",),
          mode="raw_versioned"),
    _case("capsule/raw_legacy", "a raw legacy capsule instead of an array", ("C46",),
          mode="raw_legacy"),
    _case("input/list", "a Python list (no exchange protocol)", ("C46",), Recipe(F64, (3,)),
          mode="list", producers=("python",), expect_type_error=True),
    _case("hostile/legacy_null_strides", "legacy capsule with strides == NULL (means "
          "C-contiguous)", ("C6",), mode="legacy_null_strides", producers=REF),
    _case("hostile/v12_null_strides", "DLPack 1.2 capsule with strides == NULL", ("C7",),
          mode="v12_null_strides", producers=REF,
          refuse="DLPack >= 1.2 forbids NULL strides for ndim > 0 (C7)"),
    _case("hostile/major2", "versioned capsule with major version 2", ("C17",), mode="major2",
          producers=REF,
          refuse="an unknown major version must be refused, only the deleter called (C17)"),
    _case("hostile/null_data", "zero-size (0, 3) with data == NULL", ("C9",), Recipe(F64, (0, 3)),
          mode="null_data", producers=REF),
    _case("hostile/unknown_dtype", "a dtype code DLPack does not define (99)", ("C63",),
          mode="unknown_dtype", producers=REF,
          refuse="an unknown dtype code must be refused with BufferError, the deleter run once "
          "(C63)"),
    _case("hostile/unknown_flags", "DLPack 1.3 capsule with flag bits 1.3 does not define (a "
          "later header's)", ("C64",), mode="unknown_flags", producers=REF),
    _case("hostile/byte_offset", "x[3:] exported as its base's data pointer with byte_offset 24",
          ("C65",), _ix(F64, (10,), S(3, None)), mode="byte_offset", producers=REF),
    _case("torch/conj", "complex tensor with the conjugate bit set", ("C28",),
          Recipe("complex64", (4,)), mode="torch_conj", producers=("torch",),
          refuse="DLPack cannot carry torch's lazy conjugate bit; BufferError naming resolve_conj "
          "(C28)"),
    _case("torch/requires_grad", "tensor with requires_grad=True", ("C29",),
          Recipe("float32", (4,)), mode="torch_grad", producers=("torch",),
          refuse="DLPack cannot carry autograd state; BufferError naming detach (C29)"),
    # what the DLPack header and the peers added in 2026: the TPU device types, a read-only 1-D
    # array asked for a legacy capsule (pyarrow.Array's legacy export), and the bfloat16
    # exchange NumPy could make through its DLPack dtype registry
    _case("device/tpu_host", "host memory exported as TPU pinned host memory (kDLTPUHost, a CPU "
          "consumer may read it)", ("C33",), mode="tpu_host", producers=REF),
    _case("device/tpu", "memory on a TPU (kDLTPU), no device= (a CPU consumer must refuse with a "
          "hint)", ("C36",), mode="tpu", producers=REF),
    _case("device/ascend", "memory on an Ascend NPU (kDLAscend = 21, added after DLPack 1.3 "
          "without a version bump), no device= (a CPU consumer must refuse with a hint)",
          ("C36",), mode="ascend", producers=REF),
    _case("capsule/legacy_readonly_1d", "read-only 1-D array asked for a legacy capsule (an "
          "immutable pyarrow.Array)", ("C13",), Recipe(F64, (12,), readonly=True), mode="legacy",
          refuse=LEGACY_READ_ONLY),
    _case("dtype/bfloat16_registry", "bfloat16 (ml_dtypes) between NumPy and JAX: NumPy "
          "exchanges it only when its DLPack dtype registry has it", ("C25",),
          Recipe("bfloat16", (12,)), producers=("numpy", "jax"),
          peers_can="NumPy >= 2.5 imports and exports any dtype registered with "
          "numpy.dtypes.register_dlpack_dtype, and ml_dtypes, which defines bfloat16 for NumPy, "
          "registers none"),
]

#: The producer audit (:mod:`dlbridge_check.audit`): (kind, title, refs). Each asks every
#: producer's plain array for capsules and reads them with the reference consumer, so the
#: findings are the producer's alone.
AUDITS: list[tuple[str, str, tuple[str, ...]]] = [
    ("two_capsules", "two __dlpack__ calls give two distinct capsules, each consumable",
     ("C60",)),
    ("legacy_request", "a request without max_version (or with major 0) gets a legacy capsule "
     "or BufferError, never a versioned one", ("C61",)),
    ("copy_true", "copy=True never aliases, and the copy is flagged IS_COPIED", ("C62",)),
    ("copy_false", "copy=False aliases the producer's memory or refuses with BufferError",
     ("C62",)),
    ("dl_device", "dl_device of its own device or the CPU: honoured or BufferError, never "
     "another exception", ("C39", "C61")),
    ("device_claim", "the device __dlpack_device__ and the capsule name is where the memory "
     "is, as a CUDA driver says", ("C71",)),
    ("copy_false_elsewhere", "copy=False with dl_device of a device the data reaches only by a "
     "copy: BufferError, never ValueError or RuntimeError", ("C66",)),
    ("legacy_then_retry", "__dlpack__() without max_version, then with it after a BufferError "
     "(a legacy consumer's sequence): a capsule with the array's values", ("C68",)),
]

#: What a consumer is fed beyond the ordinary routes: an impossible copy=False, NumPy scalars,
#: the forms of a zero-size array's strides, oneAPI streams (the judges are in
#: :mod:`dlbridge_check.consumers`).
ZERO_SIZE_FORMS = [
    ("zero_size_c_strides", "the C strides (3, 1)"),
    ("zero_size_zero_strides", "strides (0, 0)"),
    ("zero_size_null_strides", "strides NULL in a DLPack 1.1 capsule"),
    ("zero_size_unit_strides", "strides (1, 1)"),
]
ZERO_SIZE_ACCEPT = "an array without elements has no layout: every form of its strides is valid"
CONSUMER_ROWS: list[Case] = [
    _case("copy/false_device_memory", 'memory on an Ascend NPU with device="cpu", copy=False: '
          "only a copy reaches the CPU, so the consumer must refuse", ("C66", "C39"),
          mode="ascend", device="cpu", copy=False, producers=REF, judge="copy_false_device"),
    _case("input/numpy_scalar", "a NumPy scalar (np.float64) instead of an array", ("C67",),
          Recipe(F64, ()), producers=("numpy",), judge="numpy_scalar"),
    _case("input/scalar_readonly", "a scalar exporting read-only data in versioned capsules "
          "only, refusing legacy requests (NumPy >= 2.6 scalars)", ("C67",), Recipe(F64, ()),
          mode="scalar_readonly", producers=REF),
    *[_case(f"layout/{mode}", f"zero-size (0, 3) exported with {what}", ("C57", "C69"),
            Recipe("float32", (0, 3)), mode=mode, producers=REF, must_accept=ZERO_SIZE_ACCEPT)
      for mode, what in ZERO_SIZE_FORMS],
    # every producer: the judge takes those whose memory is oneAPI memory (dpnp's)
    _case("device/oneapi_stream", "oneAPI memory: the stream= a consumer passes to __dlpack__ "
          "(None or the queue object the libraries agree on; None for a CPU target)", ("C70",),
          judge="oneapi_stream"),
]


def _build_cases() -> list[Case]:
    """The dtype/ rows, the layout/ rows, then the table's."""
    dtypes = [_case(f"dtype/{dt}", f"1-D {dt} array of 12 elements", refs, Recipe(dt, (12,)))
              for dt, refs in DTYPES]
    layouts = [
        _case(f"layout/{name}", title, refs, recipe, reduce=name == "size1_dims",
              strict_strides=name == "zero_size_wide")
        for name, title, refs, recipe in LAYOUTS
    ]
    audits = [_case(f"producer/{kind}", title, refs, mode=f"audit:{kind}",
                    consumers=("dlpack-ref",)) for kind, title, refs in AUDITS]
    audits.append(_case("producer/legacy_retry_readonly", "the legacy consumer's sequence "
                        "on a read-only array: never a legacy capsule aliasing it", ("C68",),
                        READ_ONLY, mode="audit:legacy_then_retry", consumers=("dlpack-ref",)))
    return dtypes + layouts + ROWS + audits + CONSUMER_ROWS


CASES: list[Case] = _build_cases()
BY_ID: dict[str, Case] = {c.id: c for c in CASES}

#: Catalog entries the checker does not exercise on this machine, and why (shown when no case
#: exercised them).
NOT_COVERED = {
    "C11": "needs Metal/MPS",
    "C19": "a producer's deleter cannot be observed from Python (covered for the reference "
           "producer)",
    "C20": "needs a GPU",
    "C21": "a memory-growth test, not an exchange: covered by dlbridge's own leak tests",
    "C22": "needs native threads and interpreter shutdown: covered by dlbridge's own lifetime "
           "tests",
    "C23": "needs free-threaded Python",
    "C28": "needs torch",
    "C29": "needs torch",
    "C31": "needs TensorFlow",
    "C36": "needs a producer on a non-CPU device (dpnp)",
    "C70": "needs a oneAPI producer (dpnp)",
    "C32": "needs two CUDA devices",
    "C33": "needs CUDA (pinned host memory)",
    "C34": "needs CUDA (managed memory)",
    "C35": "needs ROCm",
    "C41": "needs CUDA streams",
    "C42": "needs CUDA streams",
    "C43": "needs CUDA streams",
    "C44": "needs CUDA graphs",
    "C45": "needs two CUDA devices",
    "C47": "Arrow release callbacks, not a DLPack exchange: covered by dlbridge's own Arrow tests",
    "C48": "Arrow stream errors, not a DLPack exchange: covered by dlbridge's own Arrow tests",
    "C49": "Arrow schema lifetimes, not a DLPack exchange: covered by dlbridge's own Arrow tests",
    "C50": "Arrow extension types, not a DLPack exchange: covered by dlbridge's own Arrow tests",
    "C51": "Arrow string_view, not a DLPack exchange: covered by dlbridge's own Arrow tests",
    "C52": "Arrow nulls, not a DLPack exchange: covered by dlbridge's own Arrow tests",
    "C53": "needs CUDA",
    "C54": "needs CUDA",
    "C55": "CUDA IPC between two processes on a GPU (covered by dlbridge's own shared-memory tests "
           "where a CPU reaches it)",
    "C56": "pickling across processes, not an exchange between libraries in one process (covered "
           "by dlbridge's own pickle and shared-memory tests)",
    "C72": "a race of threads for one capsule, not an exchange between one producer and one "
           "consumer (covered by dlbridge's own tests on free-threaded Python)",
}


def select(patterns: list[str] | None) -> list[Case]:
    """Cases whose id matches a glob, whose feature is named, or that cover a named C-row."""
    if not patterns:
        return list(CASES)
    import fnmatch

    out = []
    for c in CASES:
        for p in patterns:
            if (
                fnmatch.fnmatchcase(c.id, p)
                or c.feature == p
                or c.id == p
                or p.upper() in c.refs
            ):
                out.append(c)
                break
    return out
