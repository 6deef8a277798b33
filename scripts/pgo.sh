#!/usr/bin/env bash
# Profile-guided release build of the extension:
#   bash scripts/pgo.sh develop [MATURIN ARGS...]         install into the venv (bootstrap.sh)
#   bash scripts/pgo.sh build OUT_DIR [MATURIN ARGS...]   a wheel in OUT_DIR (build_dist.sh)
#
# 1. builds the extension instrumented (rustc -Cprofile-generate) and runs
#    scripts/pgo_train.py with it, which writes the counts of what ran;
# 2. merges the counts (llvm-profdata, from rustup's llvm-tools component, added here when
#    missing) and builds again with them (-Cprofile-use): `maturin develop --release` or
#    `maturin build --release --out OUT_DIR`, with the MATURIN ARGS.
#
# Why: an import crosses a dozen small functions; laid out by the counts, the code that runs
# sits together in the instruction cache and the error paths move out of its way. Measured on
# the 2-CPU test machine against the same build without profiles (medians of interleaved runs
# from Python): importing a tvm-ffi tensor 175 -> 145 ns, a torch tensor 192 -> 149 ns, a NumPy
# array 105 -> 91 ns; 4096 x 4096 transposes and contiguous copies within noise of each other.
# The training keeps the kernels' loops (counted once per element or tile) from outweighing the
# imports: with many large copies in it, the imports gained half as much or nothing.
#
# The counts are keyed by symbol names, and the names of a `--zig` build differ from those of
# a native one: the instrumented build is made by the same maturin command as the final one
# (for the wheel, `--zig` included), only linked by the system's `cc` (zig's linker wrapper
# rejects the profiler runtime's `-u __llvm_profile_runtime`) and not audited (it never
# leaves this machine). A profile taken from a native build fitted no function of the zig build, which
# then ran slower than a plain one (a tvm-ffi import 207 against 174 ns).
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

mode="${1:-}"
shift || true
case "$mode" in
develop)
    # the instrumented wheel is for this venv's interpreter
    generate_args=(--interpreter "$PY" "$@")
    ;;
build)
    out="${1:?usage: scripts/pgo.sh build OUT_DIR [MATURIN ARGS...]}"
    shift
    generate_args=("$@")
    ;;
*)
    echo "usage: scripts/pgo.sh develop|build OUT_DIR [MATURIN ARGS...]" >&2
    exit 2
    ;;
esac

# final_build EXTRA_RUSTFLAGS: the build that is kept
final_build() {
    if [ "$mode" = develop ]; then
        RUSTFLAGS="${RUSTFLAGS:-} $1" VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" \
            "$MATURIN" develop --release "${@:2}"
    else
        RUSTFLAGS="${RUSTFLAGS:-} $1" "$MATURIN" build --release --out "$out" "${@:2}"
    fi
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
    if [ -z "$tool" ]; then
        say "plain release build (no llvm-profdata: rustup component add llvm-tools)"
    else
        say "plain release build (DLBRIDGE_PGO=0)"
    fi
    CARGO_TARGET_DIR="$target" final_build "" "$@"
    exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

say "1/3 instrumented build"
# (build scripts of dependencies, instrumented too in a native build, leave their counts in
# $work/build, which is not merged)
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$work/build -Clinker=cc" \
    CARGO_TARGET_DIR="$target/pgo-generate" \
    "$MATURIN" build --release --auditwheel skip --out "$work/wheel" "${generate_args[@]}"
"$PY" -m zipfile -e "$work"/wheel/dlbridge-*.whl "$work/site"

say "2/3 training run"
LLVM_PROFILE_FILE="$work/train/%p-%m.profraw" PYTHONPATH="$work/site" \
    "$PY" scripts/pgo_train.py
"$tool" merge -o "$work/dlbridge.profdata" "$work"/train/*.profraw

say "3/3 build with the profile"
CARGO_TARGET_DIR="$target/pgo-use" final_build "-Cprofile-use=$work/dlbridge.profdata" "$@"
