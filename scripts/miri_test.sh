#!/usr/bin/env bash
# The core crate's unit tests under Miri (nightly), so that undefined behaviour in library
# code (an aliasing violation, a use after free, a misaligned or out-of-bounds access, a data
# race between threads) fails the run:
#   bash scripts/miri_test.sh [TEST FILTER...]
#
# Runs `cargo miri test -p dlbridge --lib` without default features and with "ndarray": no
# Python ("pyo3" loads libpython, foreign code Miri cannot run), no CUDA (the driver is
# loaded with dlopen). Miri interprets every step, so property tests run a few cases each
# (PROPTEST_CASES, default 4) and the tests Miri cannot run are marked
# `#[cfg_attr(miri, ignore = "...")]` with the reason: foreign functions (memfd_create, mmap,
# the CUDA driver), the x86 SIMD intrinsics of the copy kernels that Miri does not implement,
# and copies large enough to take the parallel path (valid, but hours of interpretation; the
# threads they use are checked by scripts/tsan_test.sh). The test of the chunked copies on the
# rayon pool runs in a second pass under Tree Borrows (see the end of the script). Two tests
# of code without `unsafe` that took most of the time (an exhaustive table search, a property
# test against serde_json) run natively only.
# About 1.5 minutes warm on two cores (70 s of tests; 2.5 minutes when the crate changed,
# about 3 more cold for Miri's sysroot and the dependencies).
#
# Needs a nightly toolchain ($DLBRIDGE_MIRI_TOOLCHAIN, default "nightly") with the miri and
# rust-src components; the script adds the components itself when rustup can, and skips
# loudly, as scripts/asan_test.sh does, when there is no nightly or the components cannot be
# installed.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

TOOLCHAIN="${DLBRIDGE_MIRI_TOOLCHAIN:-nightly}"

# shellcheck source=scripts/skip_or_fail.sh
. "$REPO/scripts/skip_or_fail.sh"
skip() { skip_or_fail miri_test "$@"; }

if ! cargo "+$TOOLCHAIN" --version >/dev/null 2>&1; then
    skip "no $TOOLCHAIN toolchain (rustup toolchain install $TOOLCHAIN to run it)"
fi
if ! cargo "+$TOOLCHAIN" miri --version >/dev/null 2>&1; then
    command -v rustup >/dev/null 2>&1 || skip "no miri component and no rustup to add it"
    rustup component add miri rust-src --toolchain "$TOOLCHAIN" >&2 ||
        skip "rustup component add miri rust-src --toolchain $TOOLCHAIN failed"
fi

# Miri's isolation hides the environment and refuses file-system access: the two variables
# that proptest reads (how many cases; no regression files to look for) are forwarded.
export PROPTEST_CASES="${PROPTEST_CASES:-4}"
export PROPTEST_DISABLE_FAILURE_PERSISTENCE=1
export MIRIFLAGS="${MIRIFLAGS:-} -Zmiri-env-forward=PROPTEST_CASES -Zmiri-env-forward=PROPTEST_DISABLE_FAILURE_PERSISTENCE"
cargo "+$TOOLCHAIN" miri setup >&2
# cargo-miri's test "binaries" are files that record the directory they were built in, and
# cargo can take one built in an earlier checkout at another path as fresh (a CI clone's
# folder changes from run to run): the crate itself is rebuilt on every run, its dependencies
# stay cached.
HOST="$(rustc "+$TOOLCHAIN" -vV | sed -n 's/^host: //p')"
cargo "+$TOOLCHAIN" clean -p dlbridge --target "$HOST" \
    --target-dir "${CARGO_TARGET_DIR:-$REPO/target}/miri" >&2
miri_test() {
    cargo "+$TOOLCHAIN" miri test -p dlbridge --lib --no-default-features --features ndarray \
        -- "$@"
}
miri_test "$@"
# The chunked copies on the rayon pool: rayon's crossbeam-epoch breaks Stacked Borrows (an
# upstream issue, so the test is ignored above), and Tree Borrows, the model it is checked
# against upstream, accepts it; a second, short run with that model. rayon's global pool
# threads live as long as the process and are never joined, so whether they are still running
# when the test's main thread ends depends on the scheduling: -Zmiri-ignore-leaks stops Miri
# from calling that a leak.
if [ "$#" -eq 0 ]; then
    MIRIFLAGS="$MIRIFLAGS -Zmiri-tree-borrows -Zmiri-ignore-leaks" \
        miri_test copy::chunked --include-ignored
fi
