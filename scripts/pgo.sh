#!/usr/bin/env bash
# Profile-guided release build of the extension, installed into the venv:
#   bash scripts/pgo.sh [MATURIN ARGS...]      (scripts/bootstrap.sh runs it)
#
# 1. builds the extension instrumented (rustc -Cprofile-generate) and runs
#    scripts/pgo_train.py with it, which writes the counts of what ran;
# 2. merges the counts (llvm-profdata, from rustup's llvm-tools component, installed here
#    when missing) and builds again with them (-Cprofile-use) and the MATURIN ARGS:
#    `maturin develop --release`.
#
# Why: an import crosses a dozen small functions; laid out by the counts, the code that runs
# sits together in the instruction cache and the error paths move out of its way. Measured on
# the 2-CPU test machine against the same build without profiles (medians of interleaved runs
# from Python): importing a tvm-ffi tensor 170 -> 139 ns, a torch tensor 192 -> 153 ns, a NumPy
# array 105 -> 95 ns; 4096 x 4096 transposes and contiguous copies within noise of each other.
# The training keeps the kernels' loops (counted once per element or tile) from outweighing the
# imports: with large copies in it, the imports counted as cold and gained nothing. The
# tables in benches/results/ are measured on this build.
#
# The distributed wheel (scripts/build_dist.sh) is a plain release build: it is linked with
# zig for manylinux2014, and zig's linker wrapper cannot link the instrumented build (it
# rejects the profiler runtime's `-u __llvm_profile_runtime`), while a profile taken from a
# native build made the zig build slower, not faster (tvm-ffi import 207 against 174 ns).
#
# Without llvm-profdata (no rustup, or no network to add the component), or with
# DLBRIDGE_PGO=0, it makes the plain release build and says so. The two builds have cargo
# target directories of their own under $CARGO_TARGET_DIR (default: target), so both stay
# incremental. Needs the venv (scripts/bootstrap.sh) with NumPy; other peers are trained on
# when installed.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
VENV="$(. scripts/env.sh && printf '%s' "$DLBRIDGE_VENV")"
PY="$VENV/bin/python"
MATURIN="$VENV/bin/maturin"

say() { printf 'pgo: %s\n' "$*"; }

# final_build EXTRA_RUSTFLAGS MATURIN ARGS...: the build that is installed into the venv
final_build() {
    local flags="$1"
    shift
    RUSTFLAGS="${RUSTFLAGS:-} $flags" VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" \
        "$MATURIN" develop --release "$@"
}

# llvm-profdata of the toolchain that builds (its LLVM reads the counts rustc writes)
profdata_tool() {
    local bin
    bin="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/llvm-profdata"
    if [ ! -x "$bin" ] && command -v rustup >/dev/null; then
        rustup component add llvm-tools >/dev/null 2>&1 || true
    fi
    [ -x "$bin" ] && printf '%s' "$bin"
}

target="${CARGO_TARGET_DIR:-$REPO/target}"
tool="$(profdata_tool || true)"
if [ "${DLBRIDGE_PGO:-1}" = 0 ] || [ -z "$tool" ]; then
    say "plain release build (${tool:+DLBRIDGE_PGO=0}${tool:-no llvm-profdata: rustup component add llvm-tools})"
    CARGO_TARGET_DIR="$target" final_build "" "$@"
    exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

say "1/3 instrumented build"
# (the build scripts of dependencies, instrumented too, leave their counts in $work/build)
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$work/build" CARGO_TARGET_DIR="$target/pgo-generate" \
    "$MATURIN" build --release --interpreter "$PY" --out "$work/wheel" "$@"
"$PY" -m zipfile -e "$work"/wheel/dlbridge-*.whl "$work/site"

say "2/3 training run"
LLVM_PROFILE_FILE="$work/train/%p-%m.profraw" PYTHONPATH="$work/site" \
    "$PY" scripts/pgo_train.py
"$tool" merge -o "$work/dlbridge.profdata" "$work"/train/*.profraw

say "3/3 build with the profile"
CARGO_TARGET_DIR="$target/pgo-use" final_build "-Cprofile-use=$work/dlbridge.profdata" "$@"
