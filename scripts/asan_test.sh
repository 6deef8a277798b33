#!/usr/bin/env bash
# The core crate's unit tests under AddressSanitizer (nightly), so that an out-of-bounds
# access, a use-after-free or a leak in library code fails the run:
#   bash scripts/asan_test.sh [TEST FILTER...]
#
# Builds into "${CARGO_TARGET_DIR:-target}/asan" (its own directory: the sanitizer flags do
# not invalidate the normal build) for the host target given explicitly, as
# -Zsanitizer=address requires. Runs `cargo test -p dlbridge --lib` with the default features
# and "ndarray" (no "pyo3": those tests load libpython, which is not built with the sanitizer).
# LeakSanitizer is on (ASan's default on Linux): a test that leaks fails too.
#
# Needs a nightly toolchain ($DLBRIDGE_ASAN_TOOLCHAIN, default "nightly"); without one the
# run is skipped loudly, as scripts/fuzz_smoke.sh does.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

TOOLCHAIN="${DLBRIDGE_ASAN_TOOLCHAIN:-nightly}"

# shellcheck source=scripts/skip_or_fail.sh
. "$REPO/scripts/skip_or_fail.sh"
if ! cargo "+$TOOLCHAIN" --version >/dev/null 2>&1; then
    skip_or_fail asan_test "no $TOOLCHAIN toolchain (rustup toolchain install $TOOLCHAIN to run it)"
fi

HOST="$(rustc "+$TOOLCHAIN" -vV | sed -n 's/^host: //p')"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}/asan"
export RUSTFLAGS="-Zsanitizer=address"
export RUSTDOCFLAGS="-Zsanitizer=address"
exec cargo "+$TOOLCHAIN" test -p dlbridge --lib --features ndarray --target "$HOST" -- "$@"
