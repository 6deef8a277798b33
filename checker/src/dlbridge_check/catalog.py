"""dlbridge's catalog of real-world exchange cases, and the page that documents it.

Each :class:`Entry` is one case that broke in a real library (ids ``C1`` to ``C72``): the input,
what went wrong and where, the public reports it comes from, what dlbridge does about it, the
tests that cover it and, when a CPU-only machine cannot exercise it, why. The checker's own
cases (:mod:`dlbridge_check.cases`) name the entries they exercise in their ``refs``.

``python -m dlbridge check --catalog`` prints the Markdown page (:func:`markdown`;
``docs/cases.md`` in the source tree is this output); :func:`html_section` gives the same content
for the checker's HTML report.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from .cases import BY_ID, CASES, FEATURES, NOT_COVERED


@dataclass(frozen=True)
class Entry:
    """One real-world case."""

    id: str
    #: what is exchanged (one line)
    input: str
    #: what goes wrong, in which real library
    problem: str
    #: the public bug reports and pull requests the case comes from (full URLs)
    reports: tuple[str, ...]
    #: what dlbridge does about it
    dlbridge: str
    #: tests that cover it, as ``path::function`` (paths relative to the source tree)
    tests: tuple[str, ...] = ()
    #: why a CPU-only machine cannot exercise it ("" when it can)
    needs: str = ""


GH = "https://github.com/"


def _i(repo: str, n: int) -> str:
    return f"{GH}{repo}/issues/{n}"


def _p(repo: str, n: int) -> str:
    return f"{GH}{repo}/pull/{n}"


TORCH, CUPY, JAX, NUMPY, TF = (
    "pytorch/pytorch",
    "cupy/cupy",
    "jax-ml/jax",
    "numpy/numpy",
    "tensorflow/tensorflow",
)
ARROW, DLPACK, ARRAY_API, PADDLE = (
    "apache/arrow",
    "dmlc/dlpack",
    "data-apis/array-api",
    "PaddlePaddle/Paddle",
)

ENTRIES: tuple[Entry, ...] = (
    Entry(
        "C1",
        "`np.arange(12.).reshape(3, 4)[:, ::-1]` (strides (32, -8)) into a consumer without "
        "negative strides",
        "torch cannot hold negative strides; imports of such views aborted the process or raised "
        "the wrong exception (PyTorch, scikit-learn).",
        (_i(TORCH, 188023), _i("scikit-learn/scikit-learn", 34307)),
        "With `copy=None` dlbridge makes one C-contiguous copy and says why; with `copy=False` it "
        "raises BufferError. It never hands the consumer a layout it cannot read.",
        (
            "tests/test_convert.py::test_c1_negative_strides_into_torch",
            "tests/interop/test_torch.py::test_dlbridge_to_torch_negative_strides_copy_route",
            "tests/interop/test_jax.py::test_dlbridge_negative_strides_to_jax",
            "tests/test_tensor.py::test_data_ptr_is_first_element_for_negative_strides",
        ),
    ),
    Entry(
        "C2",
        "`cp.flip(cp.arange(10))` into a consumer that takes row-major data only",
        'TensorFlow and CuPy reported "invalid strides" or crashed on a reversed 1-D view instead '
        'of copying or refusing.',
        (_i(TF, 51598), _i(CUPY, 5665)),
        "dlbridge copies into a compact array for such consumers (one copy, reason reported) or "
        "raises BufferError with `copy=False`.",
        (
            "tests/test_convert.py::test_c2_flip_into_compact_only_consumer",
            "tests/interop/test_tensorflow.py::test_layouts_into_tensorflow_are_copied_when_not_row_major",
            "tests/interop/test_tensorflow.py::test_tensorflow_itself_refuses_strided_capsules_with_its_own_error",
        ),
    ),
    Entry(
        "C3",
        "Fortran-ordered (4, 250) float32 array, round trip",
        "dpctl and TensorFlow lost or misread column-major strides.",
        (_i("IntelPython/dpctl", 1241), _i(TF, 42660)),
        "dlbridge keeps the strides it receives (F order is reported as F order) and values are "
        "identical after the round trip.",
        (
            "tests/interop/test_numpy.py::test_numpy_fortran_4x250",
            "tests/interop/test_torch.py::test_torch_to_dlbridge",
        ),
    ),
    Entry(
        "C4",
        "shape (1, 3, 224, 224) with strides (150528, 50176, 224, 1)",
        "Triton's client and server called such tensors non-contiguous because the stride of the "
        "extent-1 dimension is not the product of the others.",
        (_i("triton-inference-server/client", 834), _i("triton-inference-server/server", 6102)),
        "dlbridge ignores the strides of extent-1 dimensions: `is_c_contiguous` is true.",
        (
            "crates/dlbridge/src/layout.rs::contiguity_ignores_unit_dims",
            "tests/interop/test_numpy.py::test_numpy_nchw_size1",
            "tests/interop/test_torch.py::test_torch_nchw_is_c_contiguous",
        ),
    ),
    Entry(
        "C5",
        "torch (3, 1, 6, 2) float32 into a consumer that derives its own layout, then a reduction",
        "JAX rebuilt the layout from strides of extent-1 dimensions and "
        "reduced to wrong results or refused.",
        (_i(JAX, 24680), _i(JAX, 25066)),
        "dlbridge hands such tensors on as C-contiguous data (the stride of an extent-1 dimension "
        "does not matter), and the reduction in the consumer equals the source's.",
        (
            "tests/test_convert.py::test_c5_size1_dims_then_reduce",
            "tests/interop/test_jax.py::test_torch_size1_to_jax_reduce",
            "tests/interop/test_torch.py::test_torch_size1_dims_reduce",
            "tests/test_export.py::test_size1_dims_export_keeps_values",
        ),
    ),
    Entry(
        "C6",
        "legacy (pre-1.2) capsule with `strides == NULL`, ndim 2",
        "CuPy and Arrow crashed or refused on NULL strides, which older "
        "DLPack versions define as C-contiguous.",
        (_i(CUPY, 2095), _p(ARROW, 51122)),
        "dlbridge imports it as C-contiguous.",
        (
            "tests/test_import.py::test_legacy_null_strides_is_c_contiguous",
            "tests/test_import.py::test_versioned_pre_1_2_null_strides_is_c_contiguous",
            "crates/dlbridge/tests/hostile.rs::dlpack_accepts_what_it_should",
        ),
    ),
    Entry(
        "C7",
        "versioned DLPack 1.2 (or later) capsule with `strides == NULL`, ndim 2",
        "DLPack 1.2 forbids NULL strides for ndim > 0; a consumer "
        "that accepts them guesses a layout.",
        (_p(DLPACK, 178),),
        "dlbridge raises BufferError (an invalid capsule) and still calls the producer's deleter "
        "once.",
        (
            "tests/test_import.py::test_versioned_1_2_null_strides_is_buffer_error",
            "crates/dlbridge/tests/lifetimes.rs::hostile_specs",
        ),
    ),
    Entry(
        "C8",
        "0-d array export",
        "NumPy's export of 0-d arrays was fixed to publish `shape == NULL` and `strides == NULL`; "
        "consumers must accept both forms.",
        (_p(NUMPY, 29872),),
        "dlbridge exports ndim 0 with NULL shape and strides, and imports either form as a 0-d "
        "array with the same value.",
        (
            "tests/test_export.py::test_0d_export_null_shape_and_strides",
            "tests/test_import.py::test_0d_null_shape_and_strides_accepted",
            "tests/interop/test_numpy.py::test_numpy_0d",
            "tests/interop/test_torch.py::test_torch_0d",
        ),
    ),
    Entry(
        "C9",
        "shape (0, 3) with `data == NULL`",
        "CCCL and PyTorch rejected or mishandled zero-size tensors whose data pointer is NULL.",
        (_i("NVIDIA/cccl", 11605), _i(TORCH, 117058), _i(TORCH, 117273)),
        "dlbridge imports it and calls the deleter exactly once.",
        (
            "tests/test_import.py::test_zero_size_null_data",
            "tests/test_lifetimes.py::test_null_data_zero_size",
            "tests/interop/test_torch.py::test_torch_zero_size_null_data",
            "crates/dlbridge/tests/lifetimes.rs::null_data_and_zero_size_tensors",
        ),
    ),
    Entry(
        "C10",
        "zero-size (0, 2048) export",
        "Paddle exported strides (0, 2048) for empty tensors; consumers "
        "that check strides refuse them.",
        (_p(PADDLE, 78565),),
        "dlbridge exports the C strides (2048, 1).",
        (
            "tests/test_export.py::test_zero_size_export_strides",
            "tests/test_tensor.py::test_copy_c_strides_zero_size_wide",
            "crates/dlbridge/src/layout.rs::zero_size_and_scalars",
        ),
    ),
    Entry(
        "C11",
        "sliced Metal (MPS) tensor exported",
        "On Metal `data` is a buffer handle, not an address; PyTorch and MLX added the slice "
        "offset to the handle instead of `byte_offset`.",
        (_p(TORCH, 182924), _p("ml-explore/mlx", 3531)),
        "For memory that is not host-addressable dlbridge re-exports `data` and `byte_offset` "
        "exactly as received and never does arithmetic on `data`. The "
        "same rule is tested on a SYCL device.",
        ("tests/test_devices.py::test_negative_strides_on_oneapi_go_back_to_dpnp",),
        "needs Metal (Apple GPU)",
    ),
    Entry(
        "C12",
        "read-only NumPy array, `__dlpack__(max_version=(1, 0))`",
        "Read-only arrays were exported as writable, letting consumers write into memory the "
        "producer treats as immutable (NumPy, JAX).",
        (_i(NUMPY, 20742), _i(JAX, 40789)),
        "dlbridge exports a versioned capsule with the READ_ONLY flag "
        "set and keeps the flag on import.",
        (
            "tests/test_readonly.py::test_versioned_export_has_read_only_flag",
            "tests/test_export.py::test_readonly_versioned_has_flag",
            "tests/interop/test_numpy.py::test_numpy_readonly_to_dlbridge",
        ),
    ),
    Entry(
        "C13",
        "read-only NumPy array, `__dlpack__()` (legacy capsule)",
        "A legacy capsule cannot say read-only; NumPy refused with TypeError where the standard "
        "asks for BufferError.",
        (_i(NUMPY, 20742), _p(NUMPY, 22542)),
        "dlbridge answers a legacy request for a read-only tensor with a writable copy (the "
        "array API's 'copy where needed'), and with a BufferError naming `max_version=(1, 0)` "
        "under `copy=False`; a versioned request stays zero-copy with the READ_ONLY flag. A "
        "legacy capsule it imports is read-only unless its library is known to hand out its own "
        "mutable memory that way (NumPy, torch, CuPy, dpnp, Paddle, Warp, MLX, tvm-ffi).",
        (
            "tests/test_readonly.py::test_legacy_export_is_a_writable_copy",
            "tests/interop/test_legacy_capsules.py::test_a_legacy_capsule_of_each_library",
            "tests/test_export.py::test_readonly_legacy_request_gets_a_writable_copy",
            "tests/test_export.py::"
            "test_readonly_legacy_copy_false_is_buffer_error_naming_max_version",
            "tests/interop/test_jax.py::test_dlbridge_readonly_to_jax",
            "tests/interop/test_tensorflow.py::test_read_only_source_into_tensorflow_is_copied",
        ),
    ),
    Entry(
        "C14",
        "`from_dlpack` of a READ_ONLY capsule into NumPy",
        "Consumers that ignored the flag returned writable arrays over "
        "read-only memory (NumPy, PDI).",
        (_p(NUMPY, 28600), _i("pdidev/pdi", 801)),
        "dlbridge tensors of read-only capsules are read-only, and so is every NumPy array made "
        "from them: assignment raises.",
        (
            "tests/test_readonly.py::test_numpy_from_dlpack_not_writeable",
            "tests/test_import.py::test_read_only_flag_gives_readonly_tensor",
            "tests/interop/test_numpy.py::test_numpy_readonly_tensor_stays_readonly",
        ),
    ),
    Entry(
        "C15",
        "immutable JAX array into torch",
        "torch has no read-only tensors: importing a JAX buffer lets torch mutate memory JAX "
        "assumes immutable.",
        (_i(JAX, 19123),),
        "By default dlbridge copies (torch gets its own memory, the JAX buffer is untouched); with "
        "`copy=False` it raises BufferError.",
        (
            "tests/test_convert.py::test_c15_jax_into_torch_is_copied",
            "tests/interop/test_jax.py::test_jax_to_torch_through_dlbridge",
            "tests/interop/test_tensorflow.py::test_tensorflow_into_torch_is_copied",
        ),
    ),
    Entry(
        "C16",
        "read-only array into torch",
        "torch warns with a global UserWarning on every import of read-only memory and aliases it "
        "anyway (PyTorch, Ray).",
        (_i(TORCH, 47160), _p("ray-project/ray", 47776)),
        "dlbridge copies without a warning; `copy=False` raises BufferError instead of aliasing.",
        (
            "tests/test_convert.py::test_c16_readonly_numpy_into_torch",
            "tests/interop/test_torch.py::test_dlbridge_readonly_to_torch_with_copy",
        ),
    ),
    Entry(
        "C17",
        "producer returns a versioned capsule with major version 2",
        "A consumer that reads the fields of a capsule of an unknown major version reads a struct "
        "whose layout it does not know (array-api, MLX).",
        (_p(ARRAY_API, 602), _i("ml-explore/mlx", 3548)),
        "dlbridge raises BufferError without reading any field but "
        "the version, and calls the deleter.",
        (
            "tests/test_import.py::test_unknown_major_version",
            "tests/test_import.py::test_unknown_major_version_from_producer",
        ),
    ),
    Entry(
        "C18",
        "the same capsule passed to `from_dlpack` twice",
        "CuPy crashed or freed the memory twice when a capsule was consumed a second time.",
        (_i(CUPY, 3611),),
        "dlbridge renames a capsule it consumes; the second call raises "
        "BufferError and nothing is freed twice.",
        (
            "tests/test_import.py::test_consumed_capsule_is_buffer_error",
            "tests/test_lifetimes.py::test_second_consumption_raises_and_frees_once",
        ),
    ),
    Entry(
        "C19",
        "capsule created and dropped without being consumed",
        "The producer's deleter ran zero or two times (PyTorch, CuPy), leaking or double-freeing.",
        (_i(TORCH, 9260), _p(CUPY, 1445)),
        "Unconsumed dlbridge capsules call their deleter exactly once when dropped.",
        (
            "tests/test_export.py::test_unconsumed_capsule_releases_owner",
            "tests/test_lifetimes.py::test_dlbridge_capsule_never_consumed_releases_its_source",
            "tests/test_leaks.py::test_capsules_never_consumed_do_not_grow_memory",
        ),
    ),
    Entry(
        "C20",
        "10 000 export and import round trips of a 4 MB GPU array",
        "Device memory grew with every exchange (CuPy, cuDF, Paddle, Mahout).",
        (_p(CUPY, 1445), _i("rapidsai/cudf", 2400), _i(PADDLE, 47171), _i("apache/mahout", 888)),
        "dlbridge releases each imported tensor through its deleter once; the test measures device "
        "memory when a GPU is present.",
        ("tests/test_leaks.py::test_c20_device_memory_flat",),
        "needs a GPU",
    ),
    Entry(
        "C21",
        "100 000 failing exports (a dtype the negotiated version cannot express)",
        "Every refused export leaked its partly built capsule (PyTorch).",
        (_i(TORCH, 171820),),
        "dlbridge's refused exports free everything they allocated: memory stays flat over 100 000 "
        "refusals.",
        ("tests/test_leaks.py::test_failing_exports_do_not_grow_memory",),
    ),
    Entry(
        "C22",
        "deleter called from a native thread without the GIL, and after interpreter shutdown began",
        "Deleters that touch Python objects without the GIL crashed NumPy and PyTorch processes.",
        (_i(NUMPY, 22507), _i(TORCH, 88082)),
        "dlbridge's deleters take the GIL before releasing Python objects and leak them on purpose "
        "once the interpreter is finalizing.",
        (
            "tests/test_lifetimes.py::test_python_owner_released_from_a_thread_without_the_gil",
            "tests/test_lifetimes.py::test_counting_producer_deleter_runs_once_on_the_native_thread",
            "tests/test_lifetimes.py::test_interpreter_shutdown_with_live_tensors",
        ),
    ),
    Entry(
        "C23",
        "free-threaded Python, 8 threads importing from one producer at once",
        "NumPy's DLPack paths raced under free-threading.",
        (_i(NUMPY, 28881),),
        "Eight threads import from one shared producer and drop the results on other threads "
        "without error or leak. The test command runs it on free-threaded CPython 3.14 with "
        "the GIL off, where the threads run in parallel, beside tests of one capsule taken by "
        "many threads, one tensor read while others export it, concurrent deleters and "
        "interpreter shutdown mid-exchange.",
        (
            "tests/test_threads.py::test_eight_threads_exchange_and_drop",
            "tests/test_threads.py::test_one_capsule_imported_from_many_threads_is_taken_once",
            "tests/test_threads.py::test_one_tensor_read_by_threads_while_others_export_it",
            "tests/test_threads.py::test_interpreter_shutdown_while_threads_exchange",
            "tests/test_threads.py::test_gil_stays_off_with_dlbridge_and_the_peers_imported",
        ),
    ),
    Entry(
        "C24",
        "bool array export and import",
        "bool was exported as uint8, or kDLBool of 8 bits was imported as uint8 (PyTorch, Warp).",
        (_i(TORCH, 114673), _i("NVIDIA/warp", 1619)),
        "dlbridge exports kDLBool with 8 bits and imports it as bool, both ways.",
        (
            "tests/interop/test_numpy.py::test_numpy_to_dlbridge_bool_is_bool",
            "tests/interop/test_torch.py::test_torch_bool",
            "tests/interop/test_jax.py::test_jax_bool",
            "tests/interop/test_warp.py::test_warp_to_dlbridge_is_zero_copy_and_writable",
            "tests/interop/test_warp.py::test_dlbridge_to_warp_is_zero_copy",
            "tests/test_export.py::test_dtype_codes_exported",
        ),
    ),
    Entry(
        "C25",
        "bfloat16 into a consumer without bfloat16",
        "CuPy segfaulted or failed obscurely on bfloat16 capsules.",
        (_i(CUPY, 8801), _i(CUPY, 9480)),
        "dlbridge raises BufferError with a hint (install ml_dtypes for NumPy); with ml_dtypes "
        "installed NumPy gets a bfloat16 array.",
        (
            "tests/test_convert.py::test_c25_bfloat16_without_ml_dtypes",
            "tests/test_convert.py::test_c25_bfloat16_into_numpy_uses_ml_dtypes",
            "tests/interop/test_torch.py::test_torch_bfloat16_both_ways",
        ),
    ),
    Entry(
        "C26",
        "float8_e4m3fn with a negotiated version of 1.0 and of 1.1",
        "float8 type codes exist only since DLPack 1.1; PyTorch exported them to 1.0 consumers.",
        (_p(TORCH, 150691), _p(DLPACK, 158)),
        "dlbridge raises BufferError for a consumer that asked for 1.0 "
        "and exports code 10, 8 bits for 1.1.",
        (
            "tests/test_export.py::test_float8_needs_version_1_1",
            "tests/interop/test_torch.py::test_torch_float8_negotiation",
            "tests/interop/test_jax.py::test_float8_to_jax",
        ),
    ),
    Entry(
        "C27",
        "uint16 / uint32 into a consumer without unsigned types",
        "Unsigned data wrapped silently to signed values (tt-metal, old PyTorch).",
        (_i("tenstorrent/tt-metal", 31150), _i(TORCH, 58734)),
        "dlbridge raises BufferError naming the dtype; it never reinterprets unsigned as signed.",
        (
            "tests/test_convert.py::test_c27_unsigned",
            "tests/test_export.py::test_unsigned_never_wraps_to_signed",
            "tests/interop/test_torch.py::test_torch_unsigned_no_wrap",
        ),
    ),
    Entry(
        "C28",
        "torch complex tensor with the conjugate bit set",
        "DLPack cannot carry torch's lazy conjugation: consumers got the unconjugated values "
        "(array-api-compat).",
        (_i("data-apis/array-api-compat", 173),),
        "dlbridge raises BufferError naming `resolve_conj()`; opting in (`resolve=True`) resolves "
        "it with one copy.",
        (
            "tests/test_convert.py::test_c28_conjugate_bit",
            "tests/interop/test_torch.py::test_torch_conj_bit_refused",
        ),
    ),
    Entry(
        "C29",
        "torch tensor with `requires_grad=True`",
        "torch refuses to export tensors that require grad; callers had "
        "to know to call `detach()` (FlyDSL).",
        (_p("ROCm/FlyDSL", 1099),),
        "dlbridge raises BufferError naming `detach()`; `detach=True` "
        "exports the data without a copy.",
        (
            "tests/test_convert.py::test_c29_requires_grad",
            "tests/interop/test_torch.py::test_torch_requires_grad_refused",
        ),
    ),
    Entry(
        "C30",
        "bfloat16 array exported through the buffer protocol",
        "The buffer format string disagreed with the itemsize, so `memoryview` and NumPy raised or "
        "misread the data (MLX, ml_dtypes).",
        (_i("ml-explore/mlx", 3974), _i("jax-ml/ml_dtypes", 80)),
        "dlbridge refuses the buffer protocol for dtypes without a standard format (BufferError "
        "pointing to DLPack) and never gives a format that disagrees with the itemsize.",
        (
            "tests/test_buffer.py::test_bfloat16_memoryview_is_buffer_error_pointing_to_dlpack",
            "tests/test_buffer.py::test_bfloat16_numpy_asarray_no_silent_wrong_answer",
            "tests/test_buffer.py::test_float8_memoryview_is_buffer_error",
        ),
    ),
    Entry(
        "C31",
        "TensorFlow int32 tensor created under a GPU device scope",
        "TensorFlow keeps int32 tensors in host memory even on a GPU; consumers that trusted the "
        "device name read host memory as device memory.",
        (_i(TF, 41307), _i(TF, 78091)),
        "dlbridge takes the device from the capsule (where the bytes are), reports CPU and hands "
        "the consumer the right data.",
        (
            "tests/test_convert.py::test_c31_tensorflow",
            "tests/interop/test_tensorflow.py::test_tensorflow_under_a_gpu_scope_reports_where_its_bytes_are",
        ),
        "the GPU half needs a GPU; without one TensorFlow places the tensor on the CPU and the "
        "checker verifies the device it reports",
    ),
    Entry(
        "C32",
        "array on cuda:1 (CuPy or torch)",
        "The exported `device_id` was 0, or the import landed on the current device instead of "
        "cuda:1 (Paddle, cuVS).",
        (_p(PADDLE, 68549), _p("rapidsai/cuvs", 2239)),
        "dlbridge takes the device id from the memory it describes and imports on that device.",
        ("crates/dlbridge/src/cuda/memory.rs::devices_of_memory_kinds",),
        "needs two CUDA devices",
    ),
    Entry(
        "C33",
        "torch pinned host tensor",
        "Pinned memory was tagged as CUDA or as CPU inconsistently, so host consumers refused it "
        "or GPU consumers mis-addressed it (JAX, pyAMReX).",
        (_i(JAX, 22346), _p("AMReX-Codes/pyamrex", 454)),
        "dlbridge tags pinned memory kDLCUDAHost and lets host consumers read it without a copy.",
        (
            "tests/test_import.py::test_cuda_host_is_host_accessible",
            "crates/dlbridge/src/cuda/memory.rs::devices_of_memory_kinds",
        ),
        "needs CUDA (pinned host memory)",
    ),
    Entry(
        "C34",
        "CUDA managed allocation",
        "Managed memory was tagged kDLCUDAHost, or refused by CPU consumers (PyTorch, "
        "cuda-python).",
        (_i(TORCH, 96318), _p("NVIDIA/cuda-python", 1863)),
        "dlbridge tags managed memory kDLCUDAManaged (not kDLCUDAHost) and treats it as "
        "host-accessible, so CPU consumers can read it.",
        ("crates/dlbridge/src/cuda/memory.rs::devices_of_memory_kinds",),
        "needs CUDA (managed memory)",
    ),
    Entry(
        "C35",
        "ROCm tensor",
        "PyTorch's ROCm build exported its tensors as CUDA.",
        (_p(TORCH, 40123),),
        "dlbridge keeps the kDLROCM tag and applies ROCm's stream rules.",
        ("crates/dlbridge/src/cuda/stream.rs::rocm_and_host_stream_rules",),
        "needs a ROCm GPU",
    ),
    Entry(
        "C36",
        "`from_dlpack(device_array)` into a CPU-only target, no `device=`",
        "CPU consumers failed with unhelpful errors on device data (DLPack, NumPy).",
        (_i(DLPACK, 132), _i(NUMPY, 30937)),
        'dlbridge raises BufferError with the hint `device="cpu"`.',
        (
            "tests/test_convert.py::test_c36_device_data_into_cpu_target_needs_device",
            "tests/test_devices.py::test_oneapi_without_device_keeps_the_device_and_names_the_fix",
        ),
    ),
    Entry(
        "C37",
        '`from_dlpack(device_array, device="cpu")`',
        "The device-to-host copy was missing, not reported, or not finished when the call returned "
        "(array API standard, DLPack).",
        (_p(ARRAY_API, 741), _i(DLPACK, 152)),
        "dlbridge asks the producer for a host copy, reports `is_copied` "
        "and returns data that is ready.",
        (
            "tests/test_convert.py::test_c37_device_to_host",
            "tests/test_devices.py::test_oneapi_to_host_is_a_producer_copy",
        ),
    ),
    Entry(
        "C38",
        '`from_dlpack(numpy_array, device="cuda")`',
        "Consumers asked the host producer for a CUDA capsule, which it cannot make (PyTorch).",
        (_p(TORCH, 169572),),
        "The consumer side performs the host-to-device copy; the "
        "producer is only asked for host memory.",
        ("tests/test_convert.py::test_c38_host_to_device_by_the_consumer",),
    ),
    Entry(
        "C39",
        "`__dlpack__(copy=False, dl_device=CPU)` on a device array",
        "PyTorch raised ValueError where the standard asks for BufferError.",
        (_i(TORCH, 194267),),
        "dlbridge raises BufferError.",
        (
            "tests/test_convert.py::test_c39_copy_false_across_devices",
            "tests/test_devices.py::test_oneapi_to_host_with_copy_false_is_refused",
        ),
    ),
    Entry(
        "C40",
        "`from_dlpack(x, copy=False)` where the target needs realigned data",
        "JAX needs 64-byte aligned buffers: with `copy=False` it refused with ValueError instead "
        "of BufferError, and its realigning copies logged a line on every import.",
        (_i(JAX, 29810), _i(JAX, 30228)),
        "dlbridge raises BufferError with `copy=False`; with "
        "`copy=None` it copies once, without logging.",
        (
            "tests/test_convert.py::test_c40_item_misaligned_is_realigned",
            "tests/test_convert.py::test_c40_jax_alignment",
        ),
    ),
    Entry(
        "C41",
        "producer queues a long matmul then `+= 2` on its own stream; the "
        "import on another stream reads at once",
        "Consumers read before the producer's work finished (Triton server, Dr.Jit).",
        (_p("triton-inference-server/server", 5550), _i("mitsuba-renderer/drjit", 198)),
        "dlbridge orders the consumer's stream after the producer's with an event, without a "
        "device-wide synchronisation.",
        ("crates/dlbridge/src/cuda/transfer.rs::consumer_streams_wait_for_pending_copies",),
        "needs CUDA streams",
    ),
    Entry(
        "C42",
        "`__dlpack__(stream=0)` on CUDA",
        "0 is ambiguous on CUDA and was accepted silently (CuPy, PyTorch).",
        (_p(CUPY, 5970), _p(TORCH, 150217)),
        "dlbridge rejects stream 0, takes 1 as the legacy default stream and 2 as the per-thread "
        "default stream.",
        (
            "crates/dlbridge/src/cuda/stream.rs::cuda_stream_rules",
            "tests/test_devices.py::test_cuda_array_interface_stream_zero_is_malformed",
            "tests/test_devices.py::test_streams_on_cpu",
        ),
        "needs CUDA streams",
    ),
    Entry(
        "C43",
        "`__dlpack__(stream=-1)`",
        '-1 means "no synchronisation", but producers recorded events or synchronised anyway.',
        (_i(ARRAY_API, 974),),
        "dlbridge records no event and does not synchronise.",
        (
            "crates/dlbridge/src/cuda/stream.rs::cuda_stream_rules",
            "tests/test_devices.py::test_streams_on_cpu",
        ),
        "needs CUDA streams",
    ),
    Entry(
        "C44",
        "export inside CUDA graph capture",
        "Synchronising on the legacy stream during capture invalidated the graph (PyTorch).",
        (_p(TORCH, 163242), _i(ARRAY_API, 974)),
        "dlbridge never synchronises the legacy stream when the consumer passes its own stream.",
        ("crates/dlbridge/src/cuda/transfer.rs::ordering_decisions_without_a_driver",),
        "needs CUDA graphs",
    ),
    Entry(
        "C45",
        "export of a tensor on cuda:1 while the current device is cuda:0",
        "Exports switched the current device and did not restore it (PyTorch, iree-turbine).",
        (_i(TORCH, 169567), _p("iree-org/iree-turbine", 1230)),
        "dlbridge pushes the primary context of the tensor's own device around each driver call "
        "and pops it afterwards, so the current device is left as it was.",
        ("crates/dlbridge/src/cuda/transfer.rs::transfer_streams_follow_the_cuda_side",),
        "needs two CUDA devices",
    ),
    Entry(
        "C46",
        "`from_dlpack` given an array object, a legacy capsule, a versioned capsule, a "
        "`memoryview`, a CUDA array interface object, a Python list",
        "Consumers raised AssertionError or crashed on inputs they did not expect (JAX, ONNX "
        "Runtime, scikit-learn).",
        (
            _i(JAX, 15686),
            _i("microsoft/onnxruntime", 24095),
            _i("scikit-learn/scikit-learn", 34046),
        ),
        "dlbridge imports the first five; a list raises a TypeError that names what it accepts.",
        (
            "tests/test_import.py::test_c46_array_object",
            "tests/test_import.py::test_c46_legacy_capsule",
            "tests/test_import.py::test_c46_versioned_capsule",
            "tests/test_import.py::test_c46_memoryview",
            "tests/test_import.py::test_c46_list_is_type_error",
        ),
    ),
    Entry(
        "C47",
        "Arrow: import an ArrowSchema whose release callback frees its memory and nulls `release`",
        "Arrow C++ read schema fields after releasing them.",
        (_i(ARROW, 47296),),
        "dlbridge moves the struct out of its capsule (the source is marked released without a "
        "call), calls `release` exactly once and reads nothing of the schema after that call.",
        ("tests/interop/test_arrow.py::test_capsules_are_single_use_and_unconsumed_ones_release",),
    ),
    Entry(
        "C48",
        "Arrow: stream import that fails on an unsupported format",
        "The error path touched private data the stream had already released (ADBC).",
        ("https://github.com/apache/arrow-adbc/issues/4363",),
        "dlbridge releases the stream once on every error path and keeps "
        "nothing that points into it.",
        (
            "tests/interop/test_arrow.py::test_stream_failing_on_an_unsupported_format_releases_cleanly",
            "crates/dlbridge/tests/lifetimes.rs::arrow_streams_release_everything_once_on_every_path",
        ),
    ),
    Entry(
        "C49",
        "Arrow: an output ArrowSchema allocated, then dropped before it is filled",
        "Dropping an unfilled struct called through a garbage `release` pointer (Arrow).",
        (_i(ARROW, 43996),),
        "dlbridge zeroes output structs before use, so an unfilled one "
        "has a NULL `release` and is skipped.",
        (
            "crates/dlbridge/src/arrow/c_struct_tests.rs::device_stream_yields_device_arrays_then_released_ones",
            "crates/dlbridge/tests/lifetimes.rs::arrow_streams_release_everything_once_on_every_path",
        ),
    ),
    Entry(
        "C50",
        "Arrow: unknown extension type round trip (also inside list and map children)",
        "Readers dropped the extension name and field metadata of types they did not know "
        "(arrow-rs, Arrow).",
        ("https://github.com/apache/arrow-rs/issues/4472", _i(ARROW, 44714)),
        "dlbridge reads an unknown extension as its storage type and keeps all field metadata.",
        (
            "tests/interop/test_arrow.py::test_unknown_extension_reads_as_storage",
            "tests/interop/test_arrow.py::test_unknown_extension_inside_a_list_reads_as_storage",
        ),
    ),
    Entry(
        "C51",
        "Arrow: string_view column exported with `requested_schema=utf8`",
        "Producers ignored the requested schema, and consumers without view types failed "
        "(VegaFusion, DuckDB).",
        (_p("vega/vegafusion", 501), _i("duckdb/duckdb", 13424)),
        "dlbridge's Arrow exports honour `requested_schema` where the request describes the same "
        "data (bit-packed booleans, an integer view, fixed-size-list storage) and otherwise answer "
        "with their default schema for the caller to cast. dlbridge holds no string columns, so "
        "string_view data never reaches it.",
        ("tests/interop/test_arrow.py::test_requested_schema_bit_packed_bool_and_storage",),
    ),
    Entry(
        "C52",
        "Arrow: primitive array with nulls into DLPack",
        "DLPack has no validity bitmap: nulls were dropped silently and the garbage behind them "
        "read as values (Arrow).",
        (_i(ARROW, 7540),),
        "dlbridge raises BufferError naming the fixes (fill the nulls first, e.g. "
        "`pyarrow.compute.fill_null`, or convert with `zero_copy_only=False`); it never drops the "
        "validity bitmap silently.",
        (
            "tests/interop/test_arrow.py::test_nulls_raise_buffer_error_naming_the_fix",
            "tests/interop/test_pyarrow.py::test_pyarrow_nulls_refused",
            "tests/interop/test_polars.py::test_nulls_raise_buffer_error_naming_the_fix",
        ),
    ),
    Entry(
        "C53",
        "Arrow device array on CUDA",
        "Device memory was handed out through the host-only `__arrow_c_array__` (nanoarrow, cuDF).",
        (_p("apache/arrow-nanoarrow", 409), _p("rapidsai/cudf", 16058)),
        "dlbridge refuses CUDA data on `__arrow_c_array__`; `__arrow_c_device_array__` works and "
        "its `sync_event` points to a `cudaEvent_t` that is waited on.",
        ("tests/interop/test_arrow.py::test_cuda_device_array_with_sync_event_round_trip",),
        "needs CUDA",
    ),
    Entry(
        "C54",
        "device memory wrapped as an Arrow buffer",
        "Printing or reading such a buffer on the host segfaulted (cuDF).",
        (_i("rapidsai/cudf", 14959),),
        "dlbridge tags the buffer CUDA; host access raises BufferError "
        "and printing never reads device memory.",
        (
            "tests/interop/test_arrow.py::test_cuda_tagged_memory_is_a_cuda_tensor_without_host_access",
        ),
        "needs CUDA",
    ),
    Entry(
        "C55",
        "CUDA IPC export of a view inside a caching-allocator block, "
        "imported in a fresh child process",
        "The handle named the block, not the view, or the import failed before any other CUDA call "
        "in the child (TensorRT, PyTorch).",
        (_i("NVIDIA/TensorRT", 1683), _i(TORCH, 36594)),
        "dlbridge.to_shared of a CUDA tensor asks the driver for the base and size of the "
        "allocation that holds the view "
        "(cuMemGetAddressRange), exports a handle to that allocation (cuIpcGetMemHandle) and sends "
        "the view's offset beside it; "
        "the receiving process opens the handle on the same device (cuIpcOpenMemHandle, which "
        "makes the primary context current "
        "first, so it works as the child's first CUDA call), checks the view against the "
        "allocation size the driver reports, "
        "and closes the handle once when the last tensor using it is gone. Without a driver every "
        "step is a BufferError.",
        (
            "tests/test_shared.py::test_to_shared_of_a_cuda_tensor_without_a_driver_is_refused",
            "tests/test_shared.py::test_cuda_ipc_handle_without_a_driver_is_refused_naming_the_device",
            "tests/test_shared.py::test_cuda_ipc_handle_of_the_wrong_size_is_refused",
            "crates/dlbridge/src/cuda/ipc.rs::opening_needs_a_cuda_device_and_a_driver",
        ),
        "needs a CUDA GPU and two processes; on a CPU machine only the "
        "refusals without a driver are exercised",
    ),
    Entry(
        "C56",
        "pickle protocol 5 of a contiguous CPU array across processes",
        "Arrays were copied into the pickle instead of travelling out of band, and received arrays "
        "were writable (Ray).",
        (_p("ray-project/ray", 57639), _i("ray-project/ray", 12317)),
        "A dlbridge Tensor pickled with protocol 5 and a buffer_callback sends its host data as "
        "one out-of-band PickleBuffer; "
        "the loaded Tensor views the buffer it is given without a copy and is read-only when that "
        "buffer is read-only (as the "
        "buffers of Ray's object store are) or the source was. Older protocols carry the bytes in "
        "band. The reconstructor "
        "validates the description against the bytes, so a tampered pickle gives an error, never a "
        "view outside the buffer.",
        (
            "tests/test_pickle.py::test_protocol5_sends_data_out_of_band_and_loads_zero_copy",
            "tests/test_pickle.py::test_load_views_whatever_buffer_it_is_given",
            "tests/test_pickle.py::test_read_only_source_loads_read_only_even_from_a_writable_buffer",
            "tests/test_pickle.py::test_no_tampering_yields_a_view_outside_the_buffer",
            "tests/test_shared.py::test_process_receives_layout_flags_and_names",
        ),
    ),
    Entry(
        "C57",
        "zero-size tensor, e.g. `(1, 8, 0, 128)` or a `(0, 3)` view with steps, into a consumer "
        "that needs contiguous input",
        "Consumers compared the strides of an empty tensor with the C strides and refused it as "
        "non-contiguous, although "
        "a tensor with no element has no layout (ONNX Runtime's `from_dlpack`, Triton's Python "
        "backend). Producers export "
        "all kinds of strides for such tensors: NumPy (0, 0), torch the strides of the view, "
        "Paddle its shape.",
        (_i("microsoft/onnxruntime", 27450), _p("triton-inference-server/python_backend", 444)),
        "dlbridge calls every zero-size tensor C- and F-contiguous whatever its strides, and "
        "exports it with the C "
        "strides, so that a consumer with the strict check takes it too.",
        (
            "tests/test_export.py::test_zero_size_is_contiguous_whatever_its_strides",
            "tests/test_export.py::test_zero_size_export_strides",
        ),
    ),
    Entry(
        "C58",
        "a versioned capsule handed to a consumer that knows only legacy ones",
        "A consumer that calls `__dlpack__()` without `max_version` knows only the legacy struct; "
        "CuTe DSL was handed a "
        "versioned capsule and misread the `DLManagedTensorVersioned` as a `DLManagedTensor`, "
        "crashing later.",
        (_i("NVIDIA/cutlass", 3359),),
        "dlbridge's `__dlpack__()` without `max_version` (or with one below 1.0) returns a legacy "
        "`dltensor` capsule; "
        "only `max_version=(1, n)` gets the versioned one. Its own import reads both by the "
        "capsule's name.",
        ("tests/test_export.py::test_an_unasked_export_is_a_legacy_capsule_for_old_consumers",),
    ),
    Entry(
        "C59",
        "`(1024, 1)` column-major or `(1, 128)` row-major tensor exported",
        "PyTorch rewrote the stride of every size-1 dimension to 1 on export, so `(1024, 1)` with "
        "strides (1, 1024) "
        "left as (1, 1): consumers that tell row- from column-major by the strides (GPU "
        "tensor-memory descriptors) lost "
        "the layout. PyTorch and Paddle took the normalisation back out; NumPy still exports (1, "
        "1) for a Fortran "
        "`(1024, 1)` array.",
        (_p(TORCH, 163282), _i(TORCH, 163274), _p(PADDLE, 77052)),
        "dlbridge exports strides as the tensor has them, size-1 dimensions included, and calls "
        "such a tensor C- and "
        "F-contiguous (the stride of a size-1 dimension never moves an address).",
        ("tests/test_export.py::test_size1_dims_keep_their_strides_on_export",),
    ),
    Entry(
        "C60",
        "`x.__dlpack__()` called twice, for two consumers",
        "tvm-ffi before 0.1.11 exposed nested outputs as one cached capsule: the second consumer "
        "got a capsule the first had already consumed and failed with \"consumed only once\" "
        "(FlashInfer).",
        (_i("flashinfer-ai/flashinfer", 4361),),
        "dlbridge's Tensor makes a new capsule on every call. The checker's producer audit "
        "(`producer/two_capsules`) asks every producer twice and reads both capsules.",
        (
            "tests/test_check_audit.py::test_two_capsules_finds_a_cached_capsule",
            "tests/test_check_audit.py::test_audits_pass_for_correct_producers",
        ),
    ),
    Entry(
        "C61",
        "`x.__dlpack__()` without `max_version`, or with `dl_device`",
        "Producers accepted a keyword and ignored it: DALI handed versioned capsules to callers "
        "that asked for none, which legacy consumers cannot parse.",
        (_i("NVIDIA/DALI", 6307),),
        "dlbridge exports a legacy capsule when no `max_version` (or a major version 0) is "
        "asked, and honours `dl_device` or raises BufferError. The producer audit "
        "(`producer/legacy_request`, `producer/dl_device`) checks every producer.",
        (
            "tests/test_check_audit.py::test_legacy_request_finds_an_ignored_max_version",
            "tests/test_check_audit.py::test_dl_device_finds_the_wrong_exception_and_device",
        ),
    ),
    Entry(
        "C62",
        "`x.__dlpack__(copy=True)` and `copy=False`",
        "Producers accepted `copy=` and ignored it (extensions built with nanobind before 3.1): "
        "`copy=True` handed out the producer's own memory, so the consumer's \"copy\" wrote "
        "through to the source.",
        (_p(ARRAY_API, 741), _p(DLPACK, 136)),
        "dlbridge's `copy=True` always copies and sets IS_COPIED; `copy=False` never copies. "
        "The producer audit (`producer/copy_true`, `producer/copy_false`) checks every "
        "producer.",
        (
            "tests/test_check_audit.py::test_copy_audits_find_an_ignored_copy",
            "tests/test_check_audit.py::test_audits_pass_for_correct_producers",
        ),
    ),
    Entry(
        "C63",
        "A capsule the consumer cannot take (a dtype, device or version it does not support)",
        "A failed import must raise BufferError and leave the capsule to its destructor, so "
        "that the producer's deleter runs once. NumPy 2.5.2 raised SystemError on an "
        "unsupported dtype and the deleter never ran: the producer's memory leaked.",
        (_i(NUMPY, 32697),),
        "dlbridge validates everything before it takes the capsule, raises BufferError naming "
        "what it refused, and leaves the capsule unconsumed. The checker's case "
        "`hostile/unknown_dtype` counts the reference producer's deleter calls for every "
        "consumer.",
        (
            "tests/test_check_audit.py::test_consumer_audits_of_dlbridge",
            "tests/test_hostile.py::test_hostile_table",
        ),
    ),
    Entry(
        "C64",
        "A DLPack 1.3 capsule with flag bits 1.3 does not define",
        "Codes and bits arrive without a version bump: the header gained device types after 1.3, "
        "and alignment bits are proposed. The CuTe DSL crashed on versioned capsules it did not "
        "expect, through PyTorch.",
        (_i("NVIDIA/cutlass", 3359), _i(DLPACK, 190)),
        "dlbridge reads only READ_ONLY and IS_COPIED, ignores the other bits on import, and "
        "`dlbridge.describe` lists them. The checker's case `hostile/unknown_flags` feeds them "
        "to every consumer.",
        (
            "tests/test_check_audit.py::test_consumer_audits_of_dlbridge",
            "tests/test_dtype_device_protocol.py::"
            "test_unknown_flag_bits_are_ignored_on_import_and_shown_by_describe",
        ),
    ),
    Entry(
        "C65",
        "A view exported as its base's data pointer plus `byte_offset`",
        "Consumers ignored `byte_offset` and read the view from the start of its base: wrong "
        "values, silently (Warp, NNTile).",
        (_i("NVIDIA/warp", 1573), _i("nntile/nntile", 464)),
        "dlbridge adds `byte_offset` to the data pointer on import and keeps it on export. The "
        "checker's case `hostile/byte_offset` feeds such a capsule to every consumer.",
        ("tests/test_check_audit.py::test_consumer_audits_of_dlbridge",),
    ),
    Entry(
        "C66",
        "`from_dlpack(x, device=\"cpu\", copy=False)` of device memory, or "
        "`x.__dlpack__(dl_device=..., copy=False)` for a device the data reaches only by a copy",
        "The wrong exception family for a request nobody can meet: MLX was reported raising "
        "ValueError; torch's meta tensors raise ValueError; the `__dlpack__` of torch, JAX and "
        "TensorFlow raise ValueError or RuntimeError for a CUDA target; JAX's `from_dlpack` raises"
        " TypeError or RuntimeError for memory on a device it lacks. A caller that catches "
        "BufferError to fall back to a copy misses them. The producer is at fault when its "
        "`__dlpack__` raises anything but BufferError (the standard fixed that in 2024.12); the "
        "consumer when its `from_dlpack` raises anything but BufferError, or turns the producer's "
        "BufferError into ValueError (its standard text names ValueError as well, for a consumer "
        "that refuses before it asks the producer).",
        (_i("ml-explore/mlx", 3680),),
        "dlbridge raises BufferError naming the copy, in `from_dlpack` and in `Tensor.__dlpack__`. "
        "The way out for a caller is to pass `copy=None` (or `copy=True`) and let the producer "
        "copy. The checker's producer audit `producer/copy_false_elsewhere` asks every producer, "
        "and `copy/false_device_memory` feeds every consumer memory on an Ascend NPU with "
        "`device=\"cpu\", copy=False`.",
        (
            "tests/test_check_consumers.py::test_copy_false_elsewhere_finds_the_wrong_exception",
            "tests/test_check_consumers.py::test_impossible_copy_false_into_consumers",
        ),
    ),
    Entry(
        "C67",
        "A NumPy scalar (`np.float64(1.0)`) handed to `from_dlpack`",
        "NumPy 2.6 scalars export their own read-only data through versioned capsules only: a "
        "request without `max_version` (or with `copy=True`) is a BufferError. A consumer that "
        "asks only for legacy capsules must pass that BufferError on, never crash or return a "
        "writable array; one that asks for versioned capsules must keep the data read-only or copy"
        " it. Older NumPy scalars have no `__dlpack__` at all, and torch then raises RuntimeError "
        "(it takes the scalar for a capsule). torch imports the read-only scalar as a writable "
        "alias, and MLX narrows it to float32. At fault: the consumer.",
        (_p(NUMPY, 32029), _i(NUMPY, 27137)),
        "dlbridge imports a scalar as a read-only 0-d Tensor. The way out for a consumer that "
        "refuses is `np.asarray(scalar)` first, a 0-d array. The checker's case "
        "`input/numpy_scalar` hands every consumer a NumPy scalar, and `input/scalar_readonly` "
        "the reference producer's stand-in for a NumPy 2.6 scalar.",
        (
            "tests/test_check_consumers.py::test_numpy_scalar_judge",
            "tests/test_check_consumers.py::test_versioned_only_scalar_into_consumers",
        ),
    ),
    Entry(
        "C68",
        "A consumer that asks for a legacy capsule first, `x.__dlpack__()`, and retries with "
        "`max_version` on BufferError",
        "A consumer that asks for a legacy capsule on purpose (nanobind does) only works with a "
        "producer that answers with a legacy capsule or a BufferError: another exception stops it "
        "(a read-only pyarrow tensor raises ArrowNotImplementedError), a versioned capsule is "
        "misread, and a legacy capsule of read-only memory hands it a writable alias (JAX's and "
        "TensorFlow's immutable arrays). At fault: the producer.",
        (_i(NUMPY, 31689), _i("wjakob/nanobind", 1122)),
        "dlbridge's `Tensor.__dlpack__()` answers a legacy request with a legacy capsule, and for "
        "read-only memory with a copy. The way out for a producer is to raise BufferError for "
        "legacy requests it cannot serve. The producer audits `producer/legacy_then_retry` and "
        "`producer/legacy_retry_readonly` run the sequence against every producer and dlbridge's "
        "exports.",
        ("tests/test_check_consumers.py::test_legacy_then_retry_against_dlbridge_and_faulty_producers",),
    ),
    Entry(
        "C69",
        "A zero-size array exported with its C strides, all-zero strides, NULL strides (DLPack "
        "1.1) or strides of 1",
        "Producers disagree on the strides of an array without elements (NumPy, Paddle before 3.3 "
        "and Paddle's main branch give three different answers); each is valid, since no element "
        "is ever addressed, and a consumer that refuses one is at fault (every consumer installed "
        "here takes each form).",
        (_i(PADDLE, 79555),),
        "dlbridge takes every form and exports the C strides. The way out for a consumer is to "
        "skip the stride check when a dimension is 0. The checker's cases "
        "`layout/zero_size_*_strides` feed each form to every consumer, and a refusal is a "
        "finding against it.",
        ("tests/test_check_consumers.py::test_zero_size_stride_forms",),
    ),
    Entry(
        "C70",
        "The `stream=` a consumer passes to `__dlpack__` for oneAPI (SYCL) memory",
        "The standard defines stream integers for CUDA and ROCm only; for oneAPI it leaves the "
        "stream to an object the libraries agree on (dpctl takes its `SyclQueue`), and a CPU "
        "target takes `stream=None` only. A consumer that passes a CUDA-style integer, or a queue "
        "with `dl_device=(kDLCPU, 0)`, gets a TypeError or ValueError from the producer. At fault:"
        " the consumer. No consumer installed here passes a stream for oneAPI memory.",
        (_i(TORCH, 195825),),
        "dlbridge passes no stream (the producer orders its own work). The way out for a "
        "consumer is `stream=None`, or the producer's queue. The checker's case "
        "`device/oneapi_stream` records the streams each consumer passes for dpnp's memory; "
        "where none passes one it says so (unsupported).",
        (
            "tests/test_check_consumers.py::test_stream_findings",
            "tests/test_check_consumers.py::test_oneapi_stream_stand_in",
        ),
    ),
    Entry(
        "C71",
        "An array whose `__dlpack_device__` and capsule name a device its memory is not on",
        "The producer is at fault, and its consumers believe it: array-api-strict 2.6.0 "
        "reported the host memory of its virtual devices as CUDA memory, so a CUDA consumer "
        "would hand host addresses to its kernels (taken back; `(kDLCPU, id)` with an id other "
        "than 0 is proposed for such devices instead). Pinned host memory is named "
        "inconsistently: CuPy's as CPU memory, which is right, as is kDLCUDAHost.",
        (_p("data-apis/array-api-strict", 212), _p("data-apis/array-api-strict", 221),
         _p("data-apis/array-api-strict", 233), _i(JAX, 37896)),
        "dlbridge names its own memory as the CUDA driver reports it (kDLCUDA with the device's "
        "ordinal, kDLCUDAHost for pinned, kDLCUDAManaged for managed memory) and passes on the "
        "claims of the memory it imports. The checker's producer audit "
        "(`producer/device_claim`) asks the CUDA driver itself, where one is loaded, what the "
        "memory at each producer's data pointer is, and reports a claim that does not fit it "
        "against the producer; `(kDLCPU, id)` is accepted for host memory whatever the id. The "
        "way out for a producer: name host memory kDLCPU (or kDLCUDAHost when pinned) and device "
        "memory kDLCUDA with its ordinal.",
        (
            "tests/test_check_device_claim.py::test_device_claims_against_the_standin",
            "tests/test_check_device_claim.py::test_the_checker_finds_virtarrays_claim",
        ),
    ),
    Entry(
        "C72",
        "One capsule imported by several threads at once, on free-threaded Python",
        "The consumers are at fault, with the caller that shares one capsule between threads: "
        "NumPy and PyTorch check a capsule's name, read its pointer and rename it in separate "
        "steps. CPython makes each of a capsule's fields atomic, not the sequence, so with the "
        "GIL off two threads can both take one capsule: both import its memory and the "
        "producer's deleter runs twice (a double free). Measured on CPython 3.14t with NumPy "
        "2.5 and torch 2.15, eight threads on two cores: from no round to one in 15, as the "
        "threads happen to be scheduled.",
        (_i("python/cpython", 145563),),
        "dlbridge holds the capsule's critical section (free-threaded CPython's lock of an "
        "object) while it checks, reads and renames it, so two dlbridge imports never both take "
        "one capsule; it cannot stop a consumer that does not lock from taking the capsule "
        "beside it. The way out: hand each consumer the producer itself, so that each gets a "
        "capsule of its own from `__dlpack__` (never one capsule shared between threads, nor a "
        "producer that hands out a cached one), or import once and share the array. A consumer "
        "library closes the race by holding the capsule's critical section "
        "(`Py_BEGIN_CRITICAL_SECTION`) from the name check to the rename.",
        (
            "tests/test_freethreaded_race.py::test_dlbridge_takes_a_shared_capsule_once",
            "tests/test_freethreaded_race.py::test_numpy_and_torch_race_for_one_capsule",
        ),
    ),
)

BY_C: dict[str, Entry] = {e.id: e for e in ENTRIES}


def case_anchor(case_id: str) -> str:
    """The HTML anchor of a checker case (``dtype/bool`` -> ``case-dtype-bool``)."""
    return "case-" + re.sub(r"[^A-Za-z0-9]+", "-", case_id).strip("-")


def checker_cases(cid: str) -> list[str]:
    """The checker's case ids that exercise a catalog entry."""
    return [c.id for c in CASES if cid in c.refs]


def why_not_here(cid: str) -> str:
    """Why the checker cannot exercise an entry on a CPU-only machine ("" when it can)."""
    return NOT_COVERED.get(cid, "")


def report_label(url: str) -> str:
    """``https://github.com/pytorch/pytorch/issues/1`` -> ``pytorch/pytorch#1``; a pull request
    reads ``pytorch/pytorch PR #1``."""
    m = re.fullmatch(r"https://github\.com/([^/]+/[^/]+)/(issues|pull)/(\d+)", url)
    if not m:
        return url
    return f"{m.group(1)}{'#' if m.group(2) == 'issues' else ' PR #'}{m.group(3)}"


def _short_title(e: Entry) -> str:
    """The entry's input without Markdown backticks (for an HTML title attribute)."""
    return e.input.replace("`", "")


# ----------------------------------------------------------------------------- Markdown


def markdown() -> str:
    """The catalog as a Markdown page (what ``docs/cases.md`` holds)."""
    out = [
        "# Catalog of cases",
        "",
        "<!-- Generated by `python -m dlbridge check --catalog > docs/cases.md`; edit "
        "checker/src/dlbridge_check/catalog.py instead. -->",
        "",
        "Every exchange that broke in a real library and that "
        "dlbridge is built and tested against, "
        "with the public reports it comes from, what dlbridge does about it, the tests that cover "
        "it and the cases of the checker (`python -m dlbridge check`) that exercise it. The "
        "checker's reports link to these entries by their ids (C1 to C72); its own cases are "
        "checker's reports link to these entries by their ids (C1 to C70); its own cases are "
        "listed "
        "[by feature](#checker-cases) at the end.",
        "",
        "## Real-world cases",
        "",
    ]
    for e in ENTRIES:
        out += [f'<a id="{e.id}"></a>', "", f"### {e.id}: {e.input}", ""]
        out.append(f"- **What goes wrong:** {e.problem}")
        out.append("- **Reports:** " + ", ".join(f"[{report_label(u)}]({u})" for u in e.reports))
        out.append(f"- **What dlbridge does:** {e.dlbridge}")
        if e.tests:
            out.append("- **Tests:** " + ", ".join(f"`{t}`" for t in e.tests))
        cases = checker_cases(e.id)
        if cases:
            out.append(
                "- **Checker cases:** " + ", ".join(f"[`{c}`](#{case_anchor(c)})" for c in cases)
            )
        if e.needs:
            out.append(f"- **Not on a CPU-only machine:** {e.needs}")
        elif not cases and why_not_here(e.id):
            out.append(f"- **Not in the checker:** {why_not_here(e.id)}")
        out.append("")
    out += ['<a id="checker-cases"></a>', "", "## Checker cases by feature", ""]
    for feat, title in FEATURES.items():
        out += [f"### {title[0].upper()}{title[1:]} (`{feat}`)", ""]
        for c in CASES:
            if c.feature != feat:
                continue
            refs = ", ".join(f"[{r}](#{r})" for r in c.refs)
            only = f" Only from {', '.join(c.producers)}." if c.producers else ""
            out.append(
                f'- <a id="{case_anchor(c.id)}"></a>`{c.id}`: {c.title}.{only}'
                + (f" Catalog: {refs}." if refs else "")
            )
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# ----------------------------------------------------------------------------- HTML


def _code(text: str) -> str:
    """Escape for HTML and turn `backticks` into <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text, quote=True))


def html_section(ids: list[str] | None = None) -> str:
    """The catalog entries (all, or those named) and every checker case, as HTML with the
    anchors that the rest of the checker's report links to (without the tests of the source
    tree, which a wheel does not carry)."""
    chosen = [e for e in ENTRIES if ids is None or e.id in ids]
    out = ['<h2 id="catalog">Catalog of cases</h2>',
           "<p class=small>The real-world cases the results refer to, and the checker's cases.</p>"]
    for e in chosen:
        out.append(f'<div class=cat id="{e.id}"><h3>{e.id}: {_code(e.input)}</h3><ul>')
        out.append(f"<li><b>What goes wrong:</b> {_code(e.problem)}</li>")
        out.append(
            "<li><b>Reports:</b> "
            + ", ".join(
                f'<a href="{html.escape(u, quote=True)}">{html.escape(report_label(u))}</a>'
                for u in e.reports
            )
            + "</li>"
        )
        out.append(f"<li><b>What dlbridge does:</b> {_code(e.dlbridge)}</li>")
        cases = checker_cases(e.id)
        if cases:
            out.append(
                "<li><b>Checker cases:</b> " + ", ".join(case_link(c) for c in cases) + "</li>"
            )
        if e.needs:
            out.append(f"<li><b>Not on a CPU-only machine:</b> {_code(e.needs)}</li>")
        out.append("</ul></div>")
    out.append(
        "<h3>Checker "
        "cases</h3><table><tr><th>case</th><th>feature</th><th>what</th><th>catalog</th></tr>"
    )
    for c in CASES:
        refs = " ".join(entry_link(r) for r in c.refs)
        out.append(f'<tr id="{case_anchor(c.id)}"><td><code>{html.escape(c.id)}</code></td>'
                   f"<td>{html.escape(c.feature)}</td><td>{html.escape(c.title)}</td><td>{refs}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def entry_link(cid: str) -> str:
    """An HTML link to a catalog entry inside the checker's report."""
    if cid not in BY_C:
        return html.escape(cid)
    title = html.escape(_short_title(BY_C[cid]), quote=True)
    return f'<a href="#{cid}" title="{title}">{html.escape(cid)}</a>'


def case_link(case_id: str) -> str:
    """An HTML link to a checker case inside the checker's report."""
    if case_id not in BY_ID:
        return html.escape(case_id)
    return f'<a href="#{case_anchor(case_id)}"><code>{html.escape(case_id)}</code></a>'


def link_refs(escaped: str) -> str:
    """Turn the catalog ids (C1 ... C72) in already-escaped HTML text into links."""
    return re.sub(r"\bC(\d{1,2})\b", lambda m: entry_link(m.group(0)), escaped)


def for_json(ids: list[str]) -> dict[str, dict]:
    """The catalog entries named, for the checker's JSON document (without the tests of the
    source tree, which a wheel does not carry)."""
    return {
        cid: {
            "input": BY_C[cid].input,
            "problem": BY_C[cid].problem,
            "reports": list(BY_C[cid].reports),
            "dlbridge": BY_C[cid].dlbridge,
            "needs": BY_C[cid].needs,
        }
        for cid in sorted(set(ids), key=lambda s: int(s[1:]))
        if cid in BY_C
    }
