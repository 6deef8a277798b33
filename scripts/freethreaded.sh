#!/usr/bin/env bash
# The test suite on free-threaded CPython 3.14 (3.14t) with the GIL off:
#   bash scripts/freethreaded.sh [PYTEST ARGS...]
#
# Needs a CPython 3.14 source tree or tarball, named by DLBRIDGE_FT_SOURCE (no package
# registry serves a free-threaded interpreter). Without one, the step skips loudly, and fails
# under CI=true (scripts/skip_or_fail.sh). The interpreter built from it runs tests only:
# what dlbridge ships for 3.14t is built without any interpreter (scripts/build_dist.sh
# linux-x86_64-cp314t). The script
#   1. builds the interpreter with `./configure --disable-gil` into $DLBRIDGE_FT_DIR/python
#      (default ~/.cache/dlbridge/freethreaded; about 10 minutes on two cores, once per source:
#      the sha256 of the source is kept beside it, and a new source is built anew);
#   2. makes a venv there ($DLBRIDGE_FT_DIR/venv) and upgrades in it, on every run, the test
#      tools and every peer of requirements-test.txt that has a free-threaded wheel; the peers
#      without one are listed (their tests skip, as on any machine without them);
#   3. builds the cp314t wheel (build_dist.sh linux-x86_64-cp314t, warnings as errors),
#      installs it with NumPy into a fresh venv and uses it there, then installs it into the
#      venv of step 2, so the suite tests the wheel that ships;
#   4. checks that `import dlbridge` with numpy, torch, jax, pyarrow, ml_dtypes and pandas
#      leaves the GIL off, runs the main job (python -m dlbridge check; it must exit 0), then
#      pytest with PYTHON_GIL=0 (so that a peer that turns the GIL back on when imported,
#      nanoarrow for one, cannot make the suite run with it).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${DLBRIDGE_FT_DIR:-$HOME/.cache/dlbridge/freethreaded}"
FT_VENV="$WORK/venv"
say() { printf 'freethreaded: %s\n' "$*" >&2; }

SOURCE="${DLBRIDGE_FT_SOURCE:-}"
if [ -z "$SOURCE" ] || [ ! -e "$SOURCE" ]; then
    # shellcheck source=scripts/skip_or_fail.sh
    . "$REPO/scripts/skip_or_fail.sh"
    skip_or_fail freethreaded "no CPython 3.14 source: set DLBRIDGE_FT_SOURCE to a source tree or tarball"
fi

# 1. The interpreter, built once per source (scripts/build_cpython.sh).
PY="$(bash "$REPO/scripts/build_cpython.sh" "$SOURCE" "$WORK" --disable-gil)"
"$PY" - <<'EOF'
import sys, sysconfig
if not sysconfig.get_config_var("Py_GIL_DISABLED"):
    sys.exit(f"freethreaded: {sys.executable} is not a free-threaded build")
if sys.version_info < (3, 14):
    sys.exit(f"freethreaded: PyO3 builds free-threaded extensions from 3.14, not {sys.version}")
print(f"freethreaded: {sys.executable} {sys.version}", file=sys.stderr)
EOF

# 2. The venv: the test tools and the peers that have free-threaded wheels, newest releases.
[ -x "$FT_VENV/bin/python" ] || "$PY" -m venv "$FT_VENV"
VPY="$FT_VENV/bin/python"
pip_quiet() { "$VPY" -m pip install -q --upgrade --only-binary=:all: "$@"; }
pip_quiet pip
pip_quiet pytest pytest-timeout hypothesis
no_wheel=()
while read -r requirement; do
    case "$requirement" in
        "" | "#"* | maturin* | ziglang | mkdocs* | selenium | pytest* | hypothesis | ruff | mypy) continue ;;
    esac
    if ! pip_quiet "$requirement" >"$WORK/pip-last.log" 2>&1; then
        no_wheel+=("$requirement")
    fi
done <"$REPO/requirements-test.txt"
say "peers: $("$VPY" -m pip list --format=freeze 2>/dev/null |
    grep -iE '^(numpy|torch|jax|jaxlib|pyarrow|ml.dtypes|pandas|mlx|nanoarrow|arro3-core|array-api-strict|apache-tvm-ffi|cupy-cuda13x|dask|warp-lang)==' | tr '\n' ' ')"
if [ "${#no_wheel[@]}" -gt 0 ]; then
    say "no free-threaded wheel, so their tests skip: ${no_wheel[*]}"
fi

# 3. The cp314t wheel, built without this interpreter, installed into the venv.
cd "$REPO"
wheel_dir="$WORK/wheel"
rm -rf "$wheel_dir"
DLBRIDGE_DIST_DIR="$wheel_dir" bash scripts/build_dist.sh linux-x86_64-cp314t >&2
wheel="$(ls "$wheel_dir"/dlbridge-*-cp314t-*.whl)"
# As a user gets it: the wheel alone into a fresh venv (pip must pick it for 3.14t), with NumPy.
fresh="$(mktemp -d)"
"$PY" -m venv "$fresh/venv"
"$fresh/venv/bin/python" -m pip install -q --only-binary=:all: "$wheel" numpy
(cd "$fresh" && "$fresh/venv/bin/python" -W error::RuntimeWarning - <<'EOF'
import sys
import numpy as np
import dlbridge
a = np.arange(12.0).reshape(3, 4)[:, ::-1]
t = dlbridge.from_dlpack(a)
assert np.array_equal(np.from_dlpack(t), a) and t.data_ptr == a.__array_interface__["data"][0]
assert dlbridge.convert(t, "numpy", copy=True).flags.c_contiguous
assert not sys._is_gil_enabled(), "the GIL came back"
print(f"freethreaded: the cp314t wheel works in a fresh venv ({dlbridge.__file__})", file=sys.stderr)
EOF
)
rm -rf "$fresh"
# then the conformance checker's wheel (pure Python, built beside it), which the main job and the
# pytest plugin need: in a second command, because a dlbridge wheel from before the checker was
# a distribution of its own owns files the checker's wheel now holds (its uninstall would take
# them away)
"$VPY" -m pip install -q --force-reinstall --no-deps "$wheel"
"$VPY" -m pip install -q --force-reinstall --no-deps "$wheel_dir"/dlbridge_check-*.whl

# 4. The GIL stays off with dlbridge and the peers imported; then the suite, GIL off.
"$VPY" -W error::RuntimeWarning - <<'EOF'
import importlib.util, sys
import dlbridge
peers = [p for p in ("numpy", "torch", "jax", "pyarrow", "ml_dtypes", "pandas")
         if importlib.util.find_spec(p)]
for p in peers:
    __import__(p)
if sys._is_gil_enabled():
    sys.exit(f"freethreaded: the GIL came back with dlbridge and {peers} imported")
print(f"freethreaded: GIL off with dlbridge {dlbridge.__version__} and {', '.join(peers)}",
      file=sys.stderr)
EOF
# The main job under this interpreter (without PYTHON_GIL: the report says which interpreter
# and GIL state each library was checked under).
say "the main job: python -m dlbridge check (report in $WORK/check.txt)"
if ! "$VPY" -m dlbridge check --json "$WORK/check.json" >"$WORK/check.txt" 2>&1; then
    tail -n 40 "$WORK/check.txt" >&2
    say "the main job FAILED under $("$VPY" -c 'import sys; print(sys.version)')"
    exit 1
fi
tail -n 5 "$WORK/check.txt" >&2
say "pytest with PYTHON_GIL=0"
export PYTHON_GIL=0
# The abi3 wheel's distribution tests belong to the main suite: the cp314t wheel had its own
# fresh-venv check above.
unset DLBRIDGE_TEST_DIST
# the repository's package directory is not on the path: the installed wheel is what runs
cd "$REPO"
exec "$VPY" -m pytest -p no:cacheprovider --timeout="${DLBRIDGE_PYTEST_TIMEOUT:-300}" "$@"
