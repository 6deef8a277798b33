# shellcheck shell=bash
# Source this file (do not run it): `. scripts/env.sh`
#
# Exports what the test peers need before Python starts, for the venv
#   VENV (if set), else $DLBRIDGE_VENV, else <repo>/.venv
# and exports DLBRIDGE_VENV to that path.
#
# dpnp / dpctl find their SYCL device through the OpenCL CPU runtime that the PyPI
# package intel-opencl-rt installs as <venv>/lib/libintelocl.so. Its ICD file
# (<venv>/etc/OpenCL/vendors/intel-cpu.icd) holds a placeholder path, so the OpenCL
# loader must be pointed at the library directly, and the library's dependencies
# (also in <venv>/lib) must be on the loader path. Without this, importing dpnp works
# but the first array fails with "SyclDeviceCreationError: Default device is unavailable".
#
# Safe to source more than once (nothing is prepended twice). Changes no shell options.

_dlb_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DLBRIDGE_REPO="$_dlb_repo"
DLBRIDGE_VENV="${VENV:-${DLBRIDGE_VENV:-$_dlb_repo/.venv}}"
# make it absolute without requiring it to exist yet
case "$DLBRIDGE_VENV" in
    /*) ;;
    *) DLBRIDGE_VENV="$PWD/$DLBRIDGE_VENV" ;;
esac
export DLBRIDGE_REPO DLBRIDGE_VENV

_dlb_lib="$DLBRIDGE_VENV/lib"
export OCL_ICD_FILENAMES="$_dlb_lib/libintelocl.so"
case ":${LD_LIBRARY_PATH:-}:" in
    *":$_dlb_lib:"*) ;;
    *) export LD_LIBRARY_PATH="$_dlb_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
esac
unset _dlb_repo _dlb_lib
