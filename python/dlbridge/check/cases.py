"""The checker's cases: what it exchanges, between which libraries, expecting what.

Every case names the entries of dlbridge's catalog of real-world cases (C1 to C59,
:mod:`dlbridge.check.catalog`) it exercises in ``refs``. Features group cases for the
report's colour matrices. A case says how the source is built (a :class:`Recipe`: dtype, shape,
order, view operations, read-only), what is passed to ``from_dlpack`` (``copy=``, ``device=``),
how the array is handed over (``mode``: the array itself, a wrapper that forces legacy capsules,
a capsule consumed twice, a raw capsule, a Python list, a deliberately broken capsule) and, when
the only right answer is a refusal, why (``refuse``).
"""

from __future__ import annotations

from dataclasses import dataclass

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
    refuse: str | None = None  # the reason a BufferError is the only right answer
    expect_type_error: bool = False
    reduce: bool = False
    strict_strides: bool = False  # C10: strides of the extent > 1 dims must be the C strides
    #: why a direct refusal is a finding against the peers (they have what the exchange needs)
    peers_can: str | None = None


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


def _build_cases() -> list[Case]:
    cases: list[Case] = []
    add = cases.append

    for dt, refs in DTYPES:
        add(
            Case(
                f"dtype/{dt}",
                "dtype",
                f"1-D {dt} array of 12 elements",
                refs,
                Recipe(dt, (12,)),
            )
        )

    f64 = "float64"
    layouts = [
        ("contiguous", "C-contiguous (3, 4)", (), Recipe(f64, (3, 4))),
        ("transposed", "transposed (4, 3) view", (), Recipe(f64, (3, 4), ops=(("T",),))),
        ("fortran", "Fortran-ordered (4, 250) float32", ("C3",), Recipe("float32", (4, 250), "F")),
        (
            "neg_cols",
            "x[:, ::-1] (negative column stride)",
            ("C1",),
            Recipe(f64, (3, 4), ops=(("ix", (S(None), S(None, None, -1))),)),
        ),
        (
            "neg_rows",
            "x[::-1] (negative row stride)",
            ("C1",),
            Recipe(f64, (4, 3), ops=(("ix", (S(None, None, -1),)),)),
        ),
        (
            "flip_1d",
            "flip of a 1-D array",
            ("C2",),
            Recipe(f64, (10,), ops=(("ix", (S(None, None, -1),)),)),
        ),
        (
            "step_1d",
            "x[::2] (step slice)",
            (),
            Recipe(f64, (12,), ops=(("ix", (S(None, None, 2),)),)),
        ),
        (
            "step_2d",
            "x[::2, ::3]",
            (),
            Recipe(f64, (4, 6), ops=(("ix", (S(None, None, 2), S(None, None, 3))),)),
        ),
        ("offset_1d", "x[3:] (offset)", (), Recipe(f64, (10,), ops=(("ix", (S(3, None),)),))),
        (
            "offset_2d",
            "x[1:, 2:] (offset, not contiguous)",
            (),
            Recipe(f64, (4, 6), ops=(("ix", (S(1, None), S(2, None))),)),
        ),
        ("scalar_0d", "0-d array", ("C8",), Recipe(f64, ())),
        ("zero_size", "zero-size (0, 3)", ("C9",), Recipe(f64, (0, 3))),
        ("zero_size_wide", "zero-size (0, 2048)", ("C10",), Recipe("float32", (0, 2048))),
        (
            "zero_size_strided",
            "zero-size (0, 3) view with steps (contiguous all the same)",
            ("C57",),
            Recipe(f64, (0, 6), ops=(("ix", (S(None), S(None, None, 2))),)),
        ),
        (
            "size1_column",
            "(1024, 1) column-major float32 (a size-1 dimension's stride)",
            ("C59",),
            Recipe("float32", (1024, 1), "F"),
        ),
        (
            "size1_dims",
            "(3, 1, 6, 2) float32, then a reduction",
            ("C5",),
            Recipe("float32", (3, 1, 6, 2)),
        ),
        (
            "size1_leading",
            "(1, 3, 224, 224) float32 (is C-contiguous)",
            ("C4",),
            Recipe("float32", (1, 3, 224, 224)),
        ),
        (
            "zero_stride",
            "broadcast view (stride 0)",
            (),
            Recipe(f64, (4,), ops=(("broadcast", (3, 4)),)),
        ),
        (
            "misaligned",
            "float64 data at an odd address",
            ("C40",),
            Recipe(f64, (6,), ops=(("misalign",),)),
        ),
    ]
    for name, title, refs, recipe in layouts:
        add(
            Case(
                f"layout/{name}",
                "layout",
                title,
                refs,
                recipe,
                reduce=name == "size1_dims",
                strict_strides=name == "zero_size_wide",
            )
        )
    add(
        Case(
            "layout/misaligned_copy_false",
            "layout",
            "misaligned float64 data with copy=False",
            ("C40",),
            Recipe(f64, (6,), ops=(("misalign",),)),
            copy=False,
        )
    )

    ro = ("C12", "C14", "C15", "C16")
    add(
        Case(
            "readonly/contiguous",
            "readonly",
            "read-only (3, 4) array",
            ro,
            Recipe(f64, (3, 4), readonly=True),
        )
    )
    add(
        Case(
            "readonly/1d", "readonly", "read-only 1-D array", ro, Recipe(f64, (12,), readonly=True)
        )
    )
    add(
        Case(
            "readonly/strided",
            "readonly",
            "read-only x[::2, ::3] view",
            ro,
            Recipe(f64, (4, 6), ops=(("ix", (S(None, None, 2), S(None, None, 3))),), readonly=True),
        )
    )
    add(
        Case(
            "readonly/copy_false",
            "readonly",
            "read-only array with copy=False",
            ro,
            Recipe(f64, (3, 4), readonly=True),
            copy=False,
        )
    )
    add(
        Case(
            "readonly/copy_true",
            "readonly",
            "read-only array with copy=True",
            ro,
            Recipe(f64, (3, 4), readonly=True),
            copy=True,
        )
    )

    add(
        Case(
            "copy/true",
            "copy",
            "copy=True of a contiguous array",
            (),
            Recipe(f64, (3, 4)),
            copy=True,
        )
    )
    add(
        Case(
            "copy/false",
            "copy",
            "copy=False of a contiguous array",
            (),
            Recipe(f64, (3, 4)),
            copy=False,
        )
    )
    add(
        Case(
            "copy/true_transposed",
            "copy",
            "copy=True of a transposed view",
            (),
            Recipe(f64, (3, 4), ops=(("T",),)),
            copy=True,
        )
    )
    add(
        Case(
            "copy/false_transposed",
            "copy",
            "copy=False of a transposed view",
            (),
            Recipe(f64, (3, 4), ops=(("T",),)),
            copy=False,
        )
    )
    add(
        Case(
            "copy/false_neg",
            "copy",
            "copy=False of x[:, ::-1]",
            ("C1",),
            Recipe(f64, (3, 4), ops=(("ix", (S(None), S(None, None, -1))),)),
            copy=False,
        )
    )
    add(Case("copy/true_1d", "copy", "copy=True of a 1-D array", (), Recipe(f64, (12,)), copy=True))
    add(
        Case(
            "copy/false_not64",
            "copy",
            "copy=False of data 8 bytes past a 64-byte boundary",
            ("C40",),
            Recipe(f64, (12,), ops=(("shift8",),)),
            copy=False,
        )
    )

    add(Case("device/cpu", "device", 'device="cpu"', ("C37",), Recipe(f64, (3, 4)), device="cpu"))
    add(
        Case(
            "device/cpu_1d",
            "device",
            'device="cpu" of a 1-D array',
            ("C37",),
            Recipe(f64, (12,)),
            device="cpu",
        )
    )
    add(
        Case(
            "device/cpu_copy_false",
            "device",
            'device="cpu", copy=False',
            ("C39",),
            Recipe(f64, (3, 4)),
            device="cpu",
            copy=False,
        )
    )
    add(
        Case(
            "device/cpu_copy_true",
            "device",
            'device="cpu", copy=True',
            ("C37",),
            Recipe(f64, (3, 4)),
            device="cpu",
            copy=True,
        )
    )
    add(
        Case(
            "device/consumer",
            "device",
            "device= the consumer's own default device",
            ("C38",),
            Recipe(f64, (3, 4)),
            device="native",
        )
    )
    add(
        Case(
            "device/other_device",
            "device",
            "data on a non-CPU device, no device= (a CPU consumer must refuse with a hint)",
            ("C36",),
            Recipe(f64, (3, 4)),
            producers=("dpnp", "cupy"),
        )
    )
    add(
        Case(
            "device/tf_gpu_scope",
            "device",
            "TensorFlow int32 tensor created under a GPU device scope "
            "(must report where its bytes are)",
            ("C31",),
            Recipe("int32", (3,)),
            mode="tf_gpu_scope",
            producers=("tensorflow",),
        )
    )
    add(
        Case(
            "device/strided_cpu",
            "device",
            'device="cpu" of x[::2, ::3]',
            ("C37",),
            Recipe(f64, (4, 6), ops=(("ix", (S(None, None, 2), S(None, None, 3))),)),
            device="cpu",
        )
    )

    add(
        Case(
            "capsule/legacy",
            "capsule",
            "producer forced to send a legacy (unversioned) capsule",
            ("C46",),
            Recipe(f64, (3, 4)),
            mode="legacy",
        )
    )
    add(
        Case(
            "capsule/legacy_readonly",
            "capsule",
            "read-only array asked for a legacy capsule",
            ("C13",),
            Recipe(f64, (3, 4), readonly=True),
            mode="legacy",
            refuse="a legacy capsule cannot say read-only, so the producer must refuse it or "
            "hand out a copy (C13)",
        )
    )
    add(
        Case(
            "capsule/versioned",
            "capsule",
            "which capsule version the consumer asks for",
            ("C12", "C58"),
            Recipe(f64, (3, 4)),
            mode="versioned",
        )
    )
    add(
        Case(
            "capsule/consumed",
            "capsule",
            "the same capsule handed over twice",
            ("C18",),
            Recipe(f64, (3, 4)),
            mode="consumed",
        )
    )
    add(
        Case(
            "capsule/raw_versioned",
            "capsule",
            "a raw versioned capsule instead of an array",
            ("C46",),
            Recipe(f64, (3, 4)),
            mode="raw_versioned",
        )
    )
    add(
        Case(
            "capsule/raw_legacy",
            "capsule",
            "a raw legacy capsule instead of an array",
            ("C46",),
            Recipe(f64, (3, 4)),
            mode="raw_legacy",
        )
    )

    add(
        Case(
            "input/list",
            "input",
            "a Python list (no exchange protocol)",
            ("C46",),
            Recipe(f64, (3,)),
            mode="list",
            producers=("python",),
            expect_type_error=True,
        )
    )

    ref = ("dlpack-ref",)
    add(
        Case(
            "hostile/legacy_null_strides",
            "hostile",
            "legacy capsule with strides == NULL (means C-contiguous)",
            ("C6",),
            Recipe(f64, (3, 4)),
            mode="legacy_null_strides",
            producers=ref,
        )
    )
    add(
        Case(
            "hostile/v12_null_strides",
            "hostile",
            "DLPack 1.2 capsule with strides == NULL",
            ("C7",),
            Recipe(f64, (3, 4)),
            mode="v12_null_strides",
            producers=ref,
            refuse="DLPack >= 1.2 forbids NULL strides for ndim > 0 (C7)",
        )
    )
    add(
        Case(
            "hostile/major2",
            "hostile",
            "versioned capsule with major version 2",
            ("C17",),
            Recipe(f64, (3, 4)),
            mode="major2",
            producers=ref,
            refuse="an unknown major version must be refused, only the deleter called (C17)",
        )
    )
    add(
        Case(
            "hostile/null_data",
            "hostile",
            "zero-size (0, 3) with data == NULL",
            ("C9",),
            Recipe(f64, (0, 3)),
            mode="null_data",
            producers=ref,
        )
    )

    add(
        Case(
            "torch/conj",
            "torch",
            "complex tensor with the conjugate bit set",
            ("C28",),
            Recipe("complex64", (4,)),
            mode="torch_conj",
            producers=("torch",),
            refuse="DLPack cannot carry torch's lazy conjugate bit; BufferError naming "
                   "resolve_conj (C28)",
        )
    )
    add(
        Case(
            "torch/requires_grad",
            "torch",
            "tensor with requires_grad=True",
            ("C29",),
            Recipe("float32", (4,)),
            mode="torch_grad",
            producers=("torch",),
            refuse="DLPack cannot carry autograd state; BufferError naming detach (C29)",
        )
    )
    cases += _newer_header_cases()
    return cases


def _newer_header_cases() -> list[Case]:
    """Cases for what the DLPack header and the peers added in 2026: the TPU device types, a
    read-only 1-D array asked for a legacy capsule (pyarrow.Array's legacy export), and the
    bfloat16 exchange NumPy could make through its DLPack dtype registry."""
    f64 = "float64"
    ref = ("dlpack-ref",)
    return [
        Case(
            "device/tpu_host",
            "device",
            "host memory exported as TPU pinned host memory (kDLTPUHost, a CPU consumer may "
            "read it)",
            ("C33",),
            Recipe(f64, (3, 4)),
            mode="tpu_host",
            producers=ref,
        ),
        Case(
            "device/tpu",
            "device",
            "memory on a TPU (kDLTPU), no device= (a CPU consumer must refuse with a hint)",
            ("C36",),
            Recipe(f64, (3, 4)),
            mode="tpu",
            producers=ref,
        ),
        Case(
            "capsule/legacy_readonly_1d",
            "capsule",
            "read-only 1-D array asked for a legacy capsule (an immutable pyarrow.Array)",
            ("C13",),
            Recipe(f64, (12,), readonly=True),
            mode="legacy",
            refuse="a legacy capsule cannot say read-only, so the producer must refuse it or "
            "hand out a copy (C13)",
        ),
        Case(
            "dtype/bfloat16_registry",
            "dtype",
            "bfloat16 (ml_dtypes) between NumPy and JAX: NumPy exchanges it only when its "
            "DLPack dtype registry has it",
            ("C25",),
            Recipe("bfloat16", (12,)),
            producers=("numpy", "jax"),
            peers_can="NumPy >= 2.5 imports and exports any dtype registered with "
            "numpy.dtypes.register_dlpack_dtype, and ml_dtypes, which defines bfloat16 for "
            "NumPy, registers none",
        ),
    ]


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
