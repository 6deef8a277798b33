#!/usr/bin/env bash
# The Python thread tests under ThreadSanitizer, on free-threaded CPython with the GIL off:
#   bash scripts/tsan_python.sh [PYTEST ARGS...]     (default: tests/test_threads.py)
#
# Too slow for every CI run (a sanitized interpreter is built once, about 15 minutes on two
# cores, and the tests run several times slower), so the test command does not run it; run it
# after changing code that threads share (docs/ARCHITECTURE.md, "Threads without the GIL").
#   1. builds CPython from DLBRIDGE_FT_SOURCE (a CPython 3.14 source tree or tarball, as for
#      scripts/freethreaded.sh) with `--disable-gil --with-thread-sanitizer` into
#      $DLBRIDGE_TSAN_DIR/python (default ~/.cache/dlbridge/tsan), once per source;
#   2. makes a venv there with pytest, hypothesis and NumPy (NumPy's wheel is not sanitized:
#      its own races go unseen, and the interpreter's suppressions, which CPython keeps in
#      Tools/tsan/, cover what its free-threaded build is known to report);
#   3. builds the extension with the nightly toolchain, `-Zsanitizer=thread` and the standard
#      library rebuilt with it (-Zbuild-std), for that interpreter, into
#      "${CARGO_TARGET_DIR:-target}/tsan-python", and puts it beside a copy of the package;
#   4. runs pytest with PYTHON_GIL=0 and TSAN_OPTIONS=halt_on_error=1: the first race report
#      fails the run.
# Without a source or a nightly toolchain with rust-src, it says SKIPPED (FAILED under CI=true).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${DLBRIDGE_TSAN_DIR:-$HOME/.cache/dlbridge/tsan}"
PREFIX="$WORK/python"
TSAN_VENV="$WORK/venv"
TOOLCHAIN="${DLBRIDGE_TSAN_TOOLCHAIN:-nightly}"
say() { printf 'tsan_python: %s\n' "$*" >&2; }
# shellcheck source=scripts/skip_or_fail.sh
. "$REPO/scripts/skip_or_fail.sh"

SOURCE="${DLBRIDGE_FT_SOURCE:-}"
if [ -z "$SOURCE" ] || [ ! -e "$SOURCE" ]; then
    skip_or_fail tsan_python "no CPython 3.14 source: set DLBRIDGE_FT_SOURCE to a source tree or tarball"
fi
cargo "+$TOOLCHAIN" --version >/dev/null 2>&1 ||
    skip_or_fail tsan_python "no $TOOLCHAIN toolchain (rustup toolchain install $TOOLCHAIN)"
SYSROOT="$(rustc "+$TOOLCHAIN" --print sysroot)"
if [ ! -d "$SYSROOT/lib/rustlib/src/rust/library" ]; then
    rustup component add rust-src --toolchain "$TOOLCHAIN" >&2 ||
        skip_or_fail tsan_python "rustup component add rust-src --toolchain $TOOLCHAIN failed"
fi
SOURCE="$(realpath "$SOURCE")"
mkdir -p "$WORK"

# 1. The sanitized interpreter, once per source (scripts/build_cpython.sh).
PY="$(bash "$REPO/scripts/build_cpython.sh" "$SOURCE" "$WORK" --disable-gil --with-thread-sanitizer)"
# The interpreter's own suppressions (reports CPython knows of in its free-threaded build),
# and NumPy's and OpenBLAS's binaries: not built with the sanitizer, their own locks and
# atomics are invisible to it, so it reports their internal caches (NumPy's ufunc dispatch
# cache, for one) as races. Reports with a dlbridge frame stay.
SUPPRESSIONS="$WORK/suppressions.txt"
{
    cat "$PREFIX/share/tsan/suppressions_free_threading.txt"
    printf 'race:_multiarray_umath\nrace:libscipy_openblas\nrace:_multiarray_tests\n'
} >"$SUPPRESSIONS"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$SUPPRESSIONS"

# 2. The venv.
[ -x "$TSAN_VENV/bin/python" ] || "$PY" -m venv "$TSAN_VENV"
VPY="$TSAN_VENV/bin/python"
"$VPY" -m pip install -q --upgrade --only-binary=:all: pip pytest pytest-timeout hypothesis numpy

# 3. The sanitized extension beside a copy of the package.
HOST="$(rustc "+$TOOLCHAIN" -vV | sed -n 's/^host: //p')"
# The interpreter carries the C compiler's ThreadSanitizer runtime (GCC's libtsan here), and
# the extension uses it: LLVM's instrumentation would also call __tsan_memcpy, which GCC's
# runtime does not export, so memcpy stays memcpy (and is intercepted as such).
TSAN_RUSTFLAGS="-Zsanitizer=thread -Cllvm-args=-tsan-instrument-memintrinsics=false"
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}/tsan-python"
say "building the extension with -Zsanitizer=thread for $HOST"
(
    cd "$REPO"
    # PYO3_BUILD_EXTENSION_MODULE: an extension module, which takes libpython's symbols from
    # the interpreter that loads it (maturin sets it; a plain cargo build must say so).
    PYO3_BUILD_EXTENSION_MODULE=1 PYO3_PYTHON="$VPY" RUSTFLAGS="$TSAN_RUSTFLAGS" CARGO_TARGET_DIR="$TARGET_DIR" \
        cargo "+$TOOLCHAIN" build -q -p dlbridge-py --release -Zbuild-std --target "$HOST"
)
PKG="$WORK/package"
rm -rf "$PKG"
mkdir -p "$PKG"
cp -a "$REPO/python/dlbridge" "$PKG/"
rm -f "$PKG"/dlbridge/_native*.so
suffix="$("$VPY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
cp "$TARGET_DIR/$HOST/release/lib_native.so" "$PKG/dlbridge/_native$suffix"

# 4. The thread tests, GIL off, halting on the first report.
if [ "$#" -eq 0 ]; then
    set -- tests/test_threads.py
fi
cd "$REPO"
export PYTHON_GIL=0 PYTHONPATH="$PKG"
"$VPY" -c 'import sys, dlbridge; assert not sys._is_gil_enabled(); print("tsan_python:", dlbridge.__file__, file=sys.stderr)'
exec "$VPY" -m pytest -p no:cacheprovider --timeout="${DLBRIDGE_PYTEST_TIMEOUT:-1800}" "$@"
