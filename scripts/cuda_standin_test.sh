#!/usr/bin/env bash
# dlbridge's CUDA code on a machine without a GPU, against the CUDA stand-in
# (crates/cuda-standin: a strict test double of libcuda, see docs/ARCHITECTURE.md):
#
#   bash scripts/cuda_standin_test.sh           # build it, run the crate's CUDA tests with it
#   bash scripts/cuda_standin_test.sh --path    # build it, print the library's path
#
# The crate's CUDA unit tests run with the GPU ones included (`--include-ignored`) and
# DLBRIDGE_CUDA_DRIVER naming the stand-in, one at a time (its probes and injected failures are
# process-wide). The Python side is tests/test_cuda_standin.py, in the pytest step
# (DLBRIDGE_CUDA_STANDIN names the library for it). Linux only; about 30 s warm.
# The "pyo3" feature's tests link libpython: the caller sets LD_LIBRARY_PATH as for cargo test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cargo build --quiet -p dlbridge-cuda-standin
target_dir="$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
library="$target_dir/debug/libcuda_standin.so"
if [ "${1:-}" = --path ]; then
    printf '%s\n' "$library"
    exit 0
fi
DLBRIDGE_CUDA_DRIVER="$library" \
    cargo test -p dlbridge --all-features --lib -- --include-ignored --test-threads=1 cuda
