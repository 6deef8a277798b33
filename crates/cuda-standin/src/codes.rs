//! The `CUresult` values of cuda.h that the stand-in returns, with their names and messages.

use std::ffi::{CStr, c_int};

/// `CUresult`.
pub(crate) type CuResult = c_int;

pub(crate) const SUCCESS: CuResult = 0;
pub(crate) const INVALID_VALUE: CuResult = 1;
pub(crate) const OUT_OF_MEMORY: CuResult = 2;
pub(crate) const NOT_INITIALIZED: CuResult = 3;
pub(crate) const INVALID_DEVICE: CuResult = 101;
pub(crate) const INVALID_CONTEXT: CuResult = 201;
pub(crate) const INVALID_HANDLE: CuResult = 400;

/// `CUresult` values with their cuda.h name and a message like the driver's; any code may be
/// injected (`dlbridge_standin_fail`), so the names of the common failures are known too.
const TABLE: &[(CuResult, &CStr, &CStr)] = &[
    (SUCCESS, c"CUDA_SUCCESS", c"no error"),
    (
        INVALID_VALUE,
        c"CUDA_ERROR_INVALID_VALUE",
        c"invalid argument",
    ),
    (OUT_OF_MEMORY, c"CUDA_ERROR_OUT_OF_MEMORY", c"out of memory"),
    (
        NOT_INITIALIZED,
        c"CUDA_ERROR_NOT_INITIALIZED",
        c"initialization error",
    ),
    (
        100,
        c"CUDA_ERROR_NO_DEVICE",
        c"no CUDA-capable device is detected",
    ),
    (
        INVALID_DEVICE,
        c"CUDA_ERROR_INVALID_DEVICE",
        c"invalid device ordinal",
    ),
    (
        INVALID_CONTEXT,
        c"CUDA_ERROR_INVALID_CONTEXT",
        c"invalid device context",
    ),
    (
        INVALID_HANDLE,
        c"CUDA_ERROR_INVALID_HANDLE",
        c"invalid resource handle",
    ),
    (
        700,
        c"CUDA_ERROR_ILLEGAL_ADDRESS",
        c"an illegal memory access was encountered",
    ),
    (
        900,
        c"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
        c"operation not permitted when stream is capturing",
    ),
    (
        906,
        c"CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
        c"operation would make the legacy stream depend on a capturing blocking stream",
    ),
    (999, c"CUDA_ERROR_UNKNOWN", c"unknown error"),
];

/// The name (`cuGetErrorName`) or message (`cuGetErrorString`) of `code`, if known.
pub(crate) fn describe(code: CuResult, message: bool) -> Option<&'static CStr> {
    TABLE
        .iter()
        .find(|(c, _, _)| *c == code)
        .map(|(_, name, text)| if message { *text } else { *name })
}
