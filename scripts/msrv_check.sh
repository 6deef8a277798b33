#!/usr/bin/env bash
# The crate builds with the Rust versions it promises:
#   bash scripts/msrv_check.sh
#
# `cargo check --workspace --all-targets` (every crate, with its tests, benchmarks and
# dev-dependencies) with the toolchain of the workspace's `rust-version` and every feature but
# `arrow-rs`, and once more with every feature with arrow-rs's own minimum (ARROW_RS_MSRV).
# The toolchains are installed with rustup when missing (minimal profile); a failed install is
# a failure, as a promise that cannot be checked is not kept. Builds in
# <CARGO_TARGET_DIR or target>/msrv, apart from the other builds.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
ARROW_RS_MSRV=1.88
MSRV="$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)"
if [ -z "$MSRV" ]; then
    echo "msrv_check.sh: no rust-version in Cargo.toml" >&2
    exit 1
fi
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}/msrv"

check_with() {
    local version="$1"
    shift
    if ! rustup run "$version" rustc --version >/dev/null 2>&1; then
        echo "msrv_check.sh: installing Rust $version (rustup, minimal profile)"
        rustup toolchain install "$version" --profile minimal
    fi
    echo "msrv_check.sh: cargo +$version check --workspace --all-targets $*"
    cargo "+$version" check --locked --workspace --all-targets --target-dir "$TARGET_DIR" "$@"
}

# pyo3's build script needs an interpreter (any: nothing is linked by `check`)
check_with "$MSRV" --features dlbridge/cuda,dlbridge/pyo3,dlbridge/ndarray
check_with "$ARROW_RS_MSRV" --all-features
