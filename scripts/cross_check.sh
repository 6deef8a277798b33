#!/usr/bin/env bash
# The workspace compiles, clippy-clean, for every platform dlbridge ships a wheel for:
#   bash scripts/cross_check.sh [TARGET...]
#
# For each Rust target (default: the four below; the host's own build is test.sh's clippy
# step), `cargo clippy --workspace --all-targets --all-features -- -D warnings`: code, tests,
# benches, with CUDA, Python and ndarray. Nothing is linked, so no cross linker or SDK is
# needed; PYO3_CROSS_PYTHON_VERSION tells pyo3 which Python to build for without one of the
# target's interpreters.
#   x86_64-pc-windows-msvc      Windows (the Python.org interpreters' ABI)
#   aarch64-apple-darwin        macOS on Apple silicon
#   x86_64-apple-darwin         macOS on Intel
#   aarch64-unknown-linux-gnu   Linux on 64-bit Arm (Graviton, Grace, Ampere)
#
# Adds the targets' standard libraries with rustup when missing (a download the first time).
# Builds in $CARGO_TARGET_DIR/<target>, apart from the host's artefacts. Takes about 35 s a
# target cold on two cores, a few seconds warm.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

targets=("$@")
if [ "${#targets[@]}" = 0 ]; then
    targets=(x86_64-pc-windows-msvc aarch64-apple-darwin x86_64-apple-darwin aarch64-unknown-linux-gnu)
fi

installed="$(rustup target list --installed 2>/dev/null || true)"
for target in "${targets[@]}"; do
    if ! grep -qx "$target" <<<"$installed"; then
        echo "cross_check: rustup target add $target"
        rustup target add "$target"
    fi
done

for target in "${targets[@]}"; do
    start=$SECONDS
    echo "cross_check: $target"
    PYO3_CROSS_PYTHON_VERSION=3.11 \
        cargo clippy --workspace --all-targets --all-features --target "$target" -- -D warnings
    echo "cross_check: $target ok ($((SECONDS - start)) s)"
done
