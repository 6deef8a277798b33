#!/usr/bin/env bash
# Build what dlbridge ships into dist/ (git-ignored):
#   bash scripts/build_dist.sh
#
# 1. one abi3 wheel (CPython 3.11 and newer) tagged manylinux2014 (manylinux_2_17), so it
#    installs on every mainstream Linux: maturin links against an old glibc with zig
#    (`maturin build --zig`, zig from the `ziglang` PyPI package) instead of this machine's,
#    profile-guided (scripts/pgo.sh);
# 2. the source distribution (`maturin sdist`), which `pip install dlbridge-*.tar.gz` builds
#    with maturin from PyPI and a Rust toolchain.
#
# Uses the project's venv (scripts/bootstrap.sh installs maturin and ziglang there). Builds
# in <CARGO_TARGET_DIR or target>/dist, apart from the development build, so that neither
# invalidates the other's cached artefacts. Prints the paths of the two files.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
VENV="$(. scripts/env.sh && printf '%s' "$DLBRIDGE_VENV")"
PY="$VENV/bin/python"
if [ ! -x "$VENV/bin/maturin" ]; then
    echo "build_dist.sh: no maturin in $VENV; run: bash scripts/bootstrap.sh" >&2
    exit 1
fi

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}/dist"
rm -rf dist
# maturin looks for zig as `python -m ziglang` of the interpreter on PATH: the venv's
export PATH="$VENV/bin:$PATH"
# profile-guided, like the development build (DLBRIDGE_PGO=0: a plain release build)
bash scripts/pgo.sh build dist --zig --compatibility manylinux2014 --interpreter "$PY"
"$VENV/bin/maturin" sdist --out dist
ls -1 dist/*
