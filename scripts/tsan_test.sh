#!/usr/bin/env bash
# The core crate's tests that use threads under ThreadSanitizer (nightly), so that a data race
# in library code (parallel copies, deleters and owners released on other threads, one tensor
# read, exported and dropped from several threads) fails the run:
#   bash scripts/tsan_test.sh [TEST FILTER...]
#
# The standard library is rebuilt with the sanitizer (-Zbuild-std; ThreadSanitizer sees its
# atomics and fences only then), for the host target given explicitly, into
# "${CARGO_TARGET_DIR:-target}/tsan" (its own directory: the flags do not invalidate the normal
# build). Default features and "ndarray", no "pyo3" (libpython is not built with the
# sanitizer). The tests run are the unit tests of `copy` (the parallel kernels and the chunked
# copies on the rayon pool; all but two kernel tests of minutes each), `export` (exports
# dropped on other threads, one tensor shared, exported and dropped from several threads) and
# every test whose name says `thread` or `concurrent`, in the library and in
# tests/lifetimes.rs (deleters and Arrow releases on other threads); filters given on the
# command line replace them. About 1 minute warm on two cores (35 s of tests, 40 more when the
# crate changed); the first run also builds the standard library and the dependencies with the
# sanitizer (about 5 minutes more).
#
# Needs a nightly toolchain ($DLBRIDGE_TSAN_TOOLCHAIN, default "nightly") with the rust-src
# component, which the script adds itself when rustup can; without them the run is skipped
# loudly, as scripts/asan_test.sh does.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

TOOLCHAIN="${DLBRIDGE_TSAN_TOOLCHAIN:-nightly}"

# shellcheck source=scripts/skip_or_fail.sh
. "$REPO/scripts/skip_or_fail.sh"
skip() { skip_or_fail tsan_test "$@"; }

if ! cargo "+$TOOLCHAIN" --version >/dev/null 2>&1; then
    skip "no $TOOLCHAIN toolchain (rustup toolchain install $TOOLCHAIN to run it)"
fi
SYSROOT="$(rustc "+$TOOLCHAIN" --print sysroot)"
if [ ! -d "$SYSROOT/lib/rustlib/src/rust/library" ]; then
    command -v rustup >/dev/null 2>&1 || skip "no rust-src component and no rustup to add it"
    rustup component add rust-src --toolchain "$TOOLCHAIN" >&2 ||
        skip "rustup component add rust-src --toolchain $TOOLCHAIN failed"
fi

if [ "$#" -eq 0 ]; then
    # Two kernel tests take minutes each under the sanitizer (streamed transposes of 16 MiB,
    # and every instruction set up to bands of 4096-byte lines); they split their work as the
    # parallel transposes that run here do.
    set -- copy:: export:: thread concurrent \
        --skip copy::kernel::tests::large_byte_transposes_stream_past_the_caches \
        --skip copy::kernel::tests::transposes_with_every_instruction_set
fi

HOST="$(rustc "+$TOOLCHAIN" -vV | sed -n 's/^host: //p')"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}/tsan"
export RUSTFLAGS="-Zsanitizer=thread"
export RUSTDOCFLAGS="-Zsanitizer=thread"
# The property tests among them check single-threaded results, which the normal run covers
# with many cases: a few here.
export PROPTEST_CASES="${PROPTEST_CASES:-8}"
# A report fails the test binary (exit code 66) instead of only printing.
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1}"
exec cargo "+$TOOLCHAIN" test -Zbuild-std --target "$HOST" -p dlbridge --features ndarray \
    --lib --test lifetimes -- "$@"
