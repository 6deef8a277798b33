#!/usr/bin/env bash
# Build what dlbridge ships into dist/ (git-ignored; DLBRIDGE_DIST_DIR names another folder):
#   bash scripts/build_dist.sh [PLATFORM...]
#
# One abi3 wheel (CPython 3.11 and newer) per platform, all built on this Linux x86-64
# machine, a wheel for free-threaded CPython 3.14 and one for CPython 3.15 and newer (PEP 803's
# abi3t) on Linux x86-64, and the source distribution. PLATFORM is one or more of (default: all
# six):
#   linux-x86_64    tagged manylinux2014 (manylinux_2_17): linked with zig against an old glibc
#                   (`maturin build --zig`, zig from the `ziglang` PyPI package) instead of this
#                   machine's, so it installs on every mainstream Linux; profile-guided
#                   (scripts/pgo.sh)
#   linux-x86_64-cp314t
#                   free-threaded CPython 3.14 (cp314t; abi3 does not cover free-threaded
#                   builds), manylinux2014 with zig; built with no interpreter at all: maturin
#                   gives PyO3 the target's configuration from its own sysconfig data (a
#                   cross-compilation config), so no 3.14t is needed or used; not
#                   profile-guided; warnings are errors
#   linux-x86_64-abi3t
#                   CPython 3.15 and newer, GIL and free-threaded alike (tag cp315-abi3.abi3t,
#                   extension `_native.abi3t-x86_64-linux-gnu.so`: PEP 803's abi3t file tag with
#                   the platform part 3.15 adds), manylinux2014 with zig; built the same way,
#                   with no interpreter: maturin picks abi3t over abi3 only for a 3.15 target,
#                   which its bundled sysconfig data gives it; not profile-guided; warnings are
#                   errors
#   linux-aarch64   the same as linux-x86_64 for 64-bit Arm (rustup target aarch64-unknown-linux-gnu, zig)
#   macos           one universal2 wheel, Apple silicon and Intel (macOS 11 / 10.12 and newer;
#                   rustup targets aarch64-apple-darwin and x86_64-apple-darwin, zig, which
#                   brings macOS's library stubs: rustc's warning that it found no xcrun is
#                   harmless)
#   windows-x86_64  win_amd64, built for x86_64-pc-windows-gnu with Debian's MinGW-w64 linker
#                   (gcc-mingw-w64-x86-64, installed here when missing and we may); it links
#                   only python3.dll and Windows' own DLLs
# The source distribution (`maturin sdist`) is always built; `pip install dlbridge-*.tar.gz`
# builds it with maturin from PyPI and a Rust toolchain. So is the conformance checker's wheel,
# dlbridge_check-*-py3-none-any.whl (pure Python, the same version as dlbridge).
#
# Only the linux-x86_64 wheel is profile-guided: the training run must execute the build.
# Missing rustup targets are added (a download the first time). Uses the project's venv
# (scripts/bootstrap.sh installs maturin and ziglang there). Builds in
# <CARGO_TARGET_DIR or target>/dist, apart from the development build, so that neither
# invalidates the other's cached artefacts. Prints the paths of the files. About 10 min cold on
# two cores for all the platforms; linux-x86_64 alone (what CI's distribution test builds)
# about 3 min.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
VENV="$(. scripts/env.sh && printf '%s' "$DLBRIDGE_VENV")"
if [ ! -x "$VENV/bin/maturin" ]; then
    echo "build_dist.sh: no maturin in $VENV; run: bash scripts/bootstrap.sh" >&2
    exit 1
fi

platforms=("$@")
if [ "${#platforms[@]}" = 0 ]; then
    platforms=(linux-x86_64 linux-x86_64-cp314t linux-x86_64-abi3t linux-aarch64 macos windows-x86_64)
fi
for platform in "${platforms[@]}"; do
    case "$platform" in
    linux-x86_64 | linux-x86_64-cp314t | linux-x86_64-abi3t | linux-aarch64 | macos | windows-x86_64) ;;
    *)
        echo "build_dist.sh: unknown platform $platform (linux-x86_64, linux-x86_64-cp314t, linux-x86_64-abi3t, linux-aarch64, macos, windows-x86_64)" >&2
        exit 2
        ;;
    esac
done

# Nothing that ships is built by a test-only interpreter: one that scripts/build_cpython.sh
# built from a source no registry vouches for (its prefix holds the source's stamp, .source).
# When the project's venv was made with one, the wheels are built from a venv of their own,
# $DLBRIDGE_DIST_VENV (default ~/.cache/dlbridge/venv-dist), made once with the newest CPython
# of the system or pyenv (scripts/pick_python.sh newest), holding maturin and zig, and for the
# profile-guided linux-x86_64 wheel the peers its training run uses (scripts/pgo_train.py),
# upgraded on every run (torch among them: several GB the first time).
base_prefix() { "$1/bin/python" -c 'import sys; print(sys.base_prefix)'; }
if [ -f "$(base_prefix "$VENV")/.source" ]; then
    VENV="${DLBRIDGE_DIST_VENV:-$HOME/.cache/dlbridge/venv-dist}"
    if [ ! -x "$VENV/bin/python" ] || [ -f "$(base_prefix "$VENV")/.source" ]; then
        rm -rf "$VENV"
        # the system's directories and pyenv only: not the project's venv, which a caller
        # (scripts/run.sh) may have put first on PATH
        "$(PATH=/usr/local/bin:/usr/bin:/bin bash scripts/pick_python.sh newest)" -m venv "$VENV"
        if [ -f "$(base_prefix "$VENV")/.source" ]; then
            echo "build_dist.sh: $(base_prefix "$VENV") is a test-only CPython; no wheel is built with it" >&2
            exit 1
        fi
    fi
    echo "build_dist.sh: building with $VENV, a venv of $(base_prefix "$VENV")"
    mapfile -t tools < <(grep -E '^(maturin|ziglang)' requirements-test.txt)
    if [[ " ${platforms[*]} " = *" linux-x86_64 "* ]] && [ "${DLBRIDGE_PGO:-1}" != 0 ]; then
        tools+=(numpy torch "jax[cpu]" pyarrow apache-tvm-ffi array-api-strict)
    fi
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade "${tools[@]}"
fi
PY="$VENV/bin/python"
MATURIN="$VENV/bin/maturin"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}/dist"
OUT="${DLBRIDGE_DIST_DIR:-$REPO/dist}"
rm -rf "$OUT"
# maturin looks for zig as `python -m ziglang` of the interpreter on PATH: the venv's
export PATH="$VENV/bin:$PATH"

# add_targets TARGET...: rustup's standard libraries for cross builds, when missing
add_targets() {
    local installed target
    installed="$(rustup target list --installed)"
    for target in "$@"; do
        grep -qx "$target" <<<"$installed" || rustup target add "$target"
    done
}

# mingw_linker: Debian's MinGW-w64 linker for the Windows build, installed when missing and we
# may (root, or sudo without a password)
mingw_linker() {
    command -v x86_64-w64-mingw32-gcc >/dev/null && return 0
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo -n"
    if command -v apt-get >/dev/null && { [ -z "$sudo" ] || sudo -n true 2>/dev/null; }; then
        echo "build_dist.sh: apt-get install gcc-mingw-w64-x86-64 (the Windows wheel's linker)"
        $sudo apt-get update -qq
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc-mingw-w64-x86-64 >/dev/null
    else
        echo "build_dist.sh: the windows-x86_64 wheel needs x86_64-w64-mingw32-gcc: apt-get install gcc-mingw-w64-x86-64" >&2
        return 1
    fi
}

# no_interpreter_build NAME PYTHON: a Linux x86-64 wheel for PYTHON (python3.N[t]) in its own
# target directory <target>-NAME. PATH keeps only the venv (for zig), cargo and the system's
# directories, which hold no PYTHON: with --target, maturin then gives PyO3 the configuration
# it bundles for PYTHON (a cross-compilation config), and no interpreter takes part.
no_interpreter_build() {
    PATH="$VENV/bin:$(dirname "$(command -v cargo)"):/usr/bin:/bin" \
        CARGO_TARGET_DIR="$CARGO_TARGET_DIR-$1" RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-D warnings" \
        "$MATURIN" build --release --out "$OUT" --zig --compatibility manylinux2014 \
        --target x86_64-unknown-linux-gnu --interpreter "$2"
}

for platform in "${platforms[@]}"; do
    echo "build_dist.sh: $platform"
    case "$platform" in
    linux-x86_64)
        # profile-guided, like the development build (DLBRIDGE_PGO=0: a plain release build)
        VENV="$VENV" bash scripts/pgo.sh build "$OUT" --zig --compatibility manylinux2014 --interpreter "$PY"
        ;;
    linux-x86_64-cp314t)
        # Its own target directory: other flags and another PyO3 configuration would
        # otherwise invalidate the abi3 builds' artefacts, and theirs this one's.
        no_interpreter_build cp314t python3.14t
        ;;
    linux-x86_64-abi3t)
        # the same for python3.15: PyO3's abi3t-py315 feature then applies (not abi3-py311)
        no_interpreter_build abi3t python3.15
        ;;
    linux-aarch64)
        add_targets aarch64-unknown-linux-gnu
        "$MATURIN" build --release --out "$OUT" --zig --compatibility manylinux2014 \
            --target aarch64-unknown-linux-gnu --interpreter "$PY"
        ;;
    macos)
        add_targets aarch64-apple-darwin x86_64-apple-darwin
        "$MATURIN" build --release --out "$OUT" --zig --target universal2-apple-darwin --interpreter "$PY"
        ;;
    windows-x86_64)
        add_targets x86_64-pc-windows-gnu
        mingw_linker
        "$MATURIN" build --release --out "$OUT" --target x86_64-pc-windows-gnu --interpreter "$PY"
        ;;
    esac
done
"$MATURIN" sdist --out "$OUT"
# The conformance checker, dlbridge-check: one pure-Python wheel for every platform, built by
# setuptools from the same venv, without build isolation (nothing is downloaded)
"$PY" -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir "$OUT" ./checker
ls -1 "$OUT"/*
