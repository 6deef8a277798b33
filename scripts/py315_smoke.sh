#!/usr/bin/env bash
# dlbridge's two wheels for CPython 3.15, installed and used on CPython 3.15:
#   bash scripts/py315_smoke.sh
#
# 1. once: a Debian unstable amd64 root with its python3.15 (a GIL build: no registry serves a
#    free-threaded 3.15), made by scripts/debian_root.sh and kept in $DLBRIDGE_PY315_HOME
#    (default ~/.cache/dlbridge/py315; under a minute and about 220 MB). Making it needs root and the
#    Debian mirror: without them the step is SKIPPED, and FAILED under CI=true
#    (scripts/skip_or_fail.sh);
# 2. once: a venv there whose `python` is a shell script that runs the root's python3.15 with the
#    root's own dynamic loader and libraries (its glibc is newer than this machine's), with the
#    script's path as argv[0] so that Python finds the venv and every subprocess it starts (the
#    checker's workers, multiprocessing's children) runs the same way. No chroot, nothing of
#    this machine's settings changed. Every run upgrades in it the newest NumPy and every peer of
#    requirements-test.txt that has a wheel for 3.15; the others are listed (the main job then
#    reports them as not installed). The venv holds about 7 GB (torch, JAX...): about 10 min to
#    fill the first time here, 40-90 s to upgrade on later runs;
# 3. the wheels: the abi3 wheel (cp311-abi3, a plain release build, not profile-guided) and the
#    abi3t wheel (cp315-abi3.abi3t), both from scripts/build_dist.sh;
# 4. for each wheel in turn, installed into that venv: the smoke set scripts/wheel_smoke.py
#    (which asserts and prints the extension file's suffix and the interpreter's
#    importlib.machinery.EXTENSION_SUFFIXES: `.abi3.so` for the abi3 wheel, `.abi3t.so` for the
#    abi3t one, as PEP 803 names it), then the main job, `python -m dlbridge check` over every
#    installed peer, which must report no dlbridge failure (a crash or hang put down to dlbridge
#    counts as one; a peer's own is a finding against it, as in the main job).
# DLBRIDGE_SKIP_PY315=1 in scripts/test.sh skips the step. Warm, with the wheels' builds cached,
# 3 to 5 min on two busy cores (most of it the peers' upgrade and the two main jobs).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
HOME_DIR="${DLBRIDGE_PY315_HOME:-$HOME/.cache/dlbridge/py315}"
ROOT="$HOME_DIR/unstable"
PVENV="$HOME_DIR/venv"

say() { printf 'py315_smoke: %s\n' "$*"; }
took() { say "$1 ($((SECONDS - $2)) s)"; }
# shellcheck source=scripts/skip_or_fail.sh
. "$REPO/scripts/skip_or_fail.sh"
# shellcheck source=scripts/debian_root.sh
. "$REPO/scripts/debian_root.sh"

if [ "$(uname -sm)" != "Linux x86_64" ]; then
    skip_or_fail py315_smoke "runs the amd64 python3.15 of a Debian root on Linux x86-64; this is $(uname -sm)"
fi

# 1. the root, made once
start=$SECONDS
if [ ! -f "$ROOT/.dlbridge-ready" ]; then
    if [ "$(id -u)" != 0 ] || ! debian_tools debootstrap:debootstrap; then
        skip_or_fail py315_smoke "making the Debian unstable root needs root and debootstrap (once; kept in $ROOT)"
    fi
    say "making the Debian unstable amd64 root in $ROOT (once)"
    if ! debian_root amd64 unstable "$ROOT" "$HOME_DIR/debootstrap.log" python3.15 python3.15-venv; then
        skip_or_fail py315_smoke "debootstrap could not make the root (no network or mirror?): $HOME_DIR/debootstrap.log"
    fi
    rm -rf "$PVENV"
    took "root made" "$start"
fi

# 2. the venv, made once; its peers upgraded on every run
start=$SECONDS
if [ ! -f "$PVENV/.dlbridge-ready" ]; then
    say "making the venv in $PVENV (once)"
    rm -rf "$PVENV"
    PYTHONHOME="$ROOT/usr" "$ROOT/lib64/ld-linux-x86-64.so.2" \
        --library-path "$ROOT/lib/x86_64-linux-gnu:$ROOT/usr/lib/x86_64-linux-gnu" \
        "$ROOT/usr/bin/python3.15" -m venv --without-pip "$PVENV"
    rm "$PVENV/bin/python3.15"
    cat >"$PVENV/bin/python3.15" <<EOF
#!/bin/sh
# the Debian root's python3.15 with the root's loader and libraries (scripts/py315_smoke.sh)
exec "$ROOT/lib64/ld-linux-x86-64.so.2" --library-path "$ROOT/lib/x86_64-linux-gnu:$ROOT/usr/lib/x86_64-linux-gnu" --argv0 "\$0" "$ROOT/usr/bin/python3.15" "\$@"
EOF
    chmod +x "$PVENV/bin/python3.15"
    # the venv module wrote the interpreter it ran as home; Python looks for its library there
    sed -i "s|^home = .*|home = $ROOT/usr/bin|" "$PVENV/pyvenv.cfg"
    pip_wheel="$(ls "$ROOT"/usr/share/python-wheels/pip-*.whl)"
    "$PVENV/bin/python" "$pip_wheel/pip" install -q --disable-pip-version-check pip
    touch "$PVENV/.dlbridge-ready"
fi
PY="$PVENV/bin/python"
pip_quiet() { "$PY" -m pip install -q --disable-pip-version-check --upgrade --only-binary=:all: "$@"; }
pip_quiet numpy
no_wheel=()
while read -r requirement; do
    case "$requirement" in
        "" | "#"* | numpy | maturin* | ziglang | mkdocs* | selenium | pytest* | hypothesis | ruff | mypy | intel-opencl-rt) continue ;;
    esac
    pip_quiet "$requirement" >"$HOME_DIR/pip-last.log" 2>&1 || no_wheel+=("$requirement")
done <requirements-test.txt
took "venv ready: $("$PY" -c 'import platform, sysconfig, numpy; print("Python", platform.python_version(), "free-threaded" if sysconfig.get_config_var("Py_GIL_DISABLED") else "GIL", "numpy", numpy.__version__)')" "$start"
if [ "${#no_wheel[@]}" -gt 0 ]; then
    say "no wheel for Python 3.15, so not installed: ${no_wheel[*]}"
fi

# 3. the wheels
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
start=$SECONDS
DLBRIDGE_PGO=0 DLBRIDGE_DIST_DIR="$work/dist" bash scripts/build_dist.sh linux-x86_64 linux-x86_64-abi3t \
    >"$work/build.log" 2>&1 || {
    tail -n 40 "$work/build.log" >&2
    exit 1
}
took "built $(cd "$work/dist" && echo dlbridge-*.whl)" "$start"

# 4. each wheel: the smoke set, then the main job
for kind in abi3 abi3t; do
    case "$kind" in
        abi3) wheel="$(ls "$work"/dist/dlbridge-*-cp311-abi3-*.whl)" suffix=.abi3.so ;;
        abi3t) wheel="$(ls "$work"/dist/dlbridge-*-cp315-abi3.abi3t-*.whl)" suffix=.abi3t-x86_64-linux-gnu.so ;;
    esac
    # then the conformance checker's wheel, which the main job below runs (second: see
    # scripts/freethreaded.sh)
    "$PY" -m pip install -q --disable-pip-version-check --no-index --no-deps --force-reinstall "$wheel"
    "$PY" -m pip install -q --disable-pip-version-check --no-index --no-deps --force-reinstall \
        "$work"/dist/dlbridge_check-*.whl
    start=$SECONDS
    (cd "$work" && "$PY" "$REPO/scripts/wheel_smoke.py" x86_64 "$suffix")
    took "$kind wheel: smoke set passed" "$start"

    start=$SECONDS
    (cd "$work" && "$PY" -m dlbridge check --quiet --timeout 120 --json "$work/check-$kind.json" \
        >"$work/check-$kind.log") || {
        tail -n 40 "$work/check-$kind.log" >&2
        say "$kind wheel: python -m dlbridge check failed" >&2
        exit 1
    }
    "$PY" - "$work/check-$kind.json" "$kind" <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
statuses = {r["status"] for r in doc["results"]}
peers = sorted(set(doc["libraries"]) - {"python", "dlpack-ref"})
assert "numpy" in peers, doc["libraries"]
assert doc["summary"]["dlbridge_failures"] == 0, doc["summary"]["dlbridge_failure_cases"]
# a peer's own crash is a finding against it (the exit status is dlbridge's alone); a crash or
# hang put down to dlbridge is counted in dlbridge_failures above
assert "pass" in statuses, statuses
print(f"py315_smoke: {sys.argv[2]} wheel: python -m dlbridge check on {doc['platform']}:",
      len(doc["results"]), "results, through dlbridge", doc["summary"]["by_route"]["dlbridge"],
      "; peers:", ", ".join(peers))
PYEOF
    took "$kind wheel: main job passed" "$start"
done
