#!/usr/bin/env bash
# The test suite on a free-threaded CPython (no GIL), built here from source:
#   bash scripts/freethreaded.sh PATH-TO-CPYTHON-SOURCE [PYTEST ARGS...]
#
# PATH-TO-CPYTHON-SOURCE is a CPython 3.14 or newer source tree or tarball (.tar.xz, .tgz):
# PyO3 builds free-threaded extensions only from 3.14. The script
#   1. builds it with `./configure --disable-gil` into $DLBRIDGE_FT_DIR/python (default
#      ~/.cache/dlbridge/freethreaded; about 10 minutes on two cores, once);
#   2. makes a venv there ($DLBRIDGE_FT_DIR/venv) with the test tools and every peer library
#      of requirements-test.txt that installs on a free-threaded interpreter (the others are
#      listed as skipped; their tests skip themselves as on any machine without them);
#   3. builds dlbridge for it with maturin: a version-specific wheel (cp314t), since abi3 does
#      not cover free-threaded builds (PyO3 drops the crate's abi3-py311 for them);
#   4. runs pytest with PYTHON_GIL=0, which keeps the GIL off even though the module still
#      declares `gil_used = true`, so the suite really runs without it.
# Not yet run: no CPython 3.14 source was available where it was written (docs/ARCHITECTURE.md,
# "What remains before gil_used = false").
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ "$#" -lt 1 ]; then
    echo "usage: bash scripts/freethreaded.sh PATH-TO-CPYTHON-SOURCE [PYTEST ARGS...]" >&2
    exit 2
fi
SOURCE="$(realpath "$1")"
shift
WORK="${DLBRIDGE_FT_DIR:-$HOME/.cache/dlbridge/freethreaded}"
PREFIX="$WORK/python"
VENV="$WORK/venv"
mkdir -p "$WORK"

say() { printf 'freethreaded: %s\n' "$*" >&2; }

# 1. The interpreter.
if [ -f "$SOURCE" ]; then
    rm -rf "$WORK/src"
    mkdir -p "$WORK/src"
    tar -xf "$SOURCE" -C "$WORK/src" --strip-components=1
    SOURCE="$WORK/src"
fi
if [ ! -x "$SOURCE/configure" ]; then
    say "$SOURCE is not a CPython source tree (no ./configure)"
    exit 2
fi
PY="$(find "$PREFIX/bin" -maxdepth 1 -name 'python3.*t' -type f 2>/dev/null | sort | head -n1 || true)"
if [ -z "$PY" ]; then
    say "building CPython from $SOURCE into $PREFIX (--disable-gil)"
    (
        cd "$SOURCE"
        ./configure --disable-gil --prefix="$PREFIX" --with-ensurepip=install >"$WORK/configure.log"
        make -j"$(nproc)" >"$WORK/make.log"
        make install >"$WORK/install.log"
    )
    PY="$(find "$PREFIX/bin" -maxdepth 1 -name 'python3.*t' -type f | sort | head -n1)"
fi
"$PY" - <<'EOF'
import sys, sysconfig
if not sysconfig.get_config_var("Py_GIL_DISABLED"):
    sys.exit(f"freethreaded: {sys.executable} is not a free-threaded build")
if sys.version_info < (3, 14):
    sys.exit(f"freethreaded: PyO3 needs CPython 3.14+ for free-threaded builds, not {sys.version}")
print(f"freethreaded: {sys.executable} {sys.version}", file=sys.stderr)
EOF

# 2. The venv with the test tools and the peers that install here.
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
"$VPY" -m pip install -q --upgrade pip
"$VPY" -m pip install -q "maturin>=1.9,<2" pytest pytest-timeout hypothesis
skipped=()
while read -r requirement; do
    case "$requirement" in
        "" | "#"* | maturin* | ziglang | mkdocs* | selenium | pytest* | hypothesis) continue ;;
    esac
    if ! "$VPY" -m pip install -q --only-binary=:all: "$requirement" >"$WORK/pip-last.log" 2>&1; then
        skipped+=("$requirement")
    fi
done <"$REPO/requirements-test.txt"
if [ "${#skipped[@]}" -gt 0 ]; then
    say "peers with no free-threaded wheel, skipped: ${skipped[*]}"
fi

# 3. dlbridge for this interpreter (version-specific, not abi3).
cd "$REPO"
say "maturin develop --release for $("$VPY" -c 'import sys; print(sys.implementation.cache_tag)')"
VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" PYO3_PYTHON="$VPY" \
    CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}/freethreaded" \
    "$VENV/bin/maturin" develop --release

# 4. The suite, with the GIL kept off.
say "pytest with PYTHON_GIL=0"
export PYTHON_GIL=0
"$VPY" -c 'import sys, dlbridge; assert not sys._is_gil_enabled(), "the GIL came back"'
exec "$VPY" -m pytest --timeout="${DLBRIDGE_PYTEST_TIMEOUT:-300}" "$@"
