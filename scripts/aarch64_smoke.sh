#!/usr/bin/env bash
# The Linux aarch64 wheel, installed and run on this x86-64 machine under emulation:
#   bash scripts/aarch64_smoke.sh [WHEEL]
#
# 1. tools: qemu-user-static (qemu-aarch64-static) and debootstrap from Debian, installed when
#    missing and we may (root, or sudo without a password);
# 2. once: a Debian bookworm arm64 root with its own python3.11 and venv module, and in it a venv
#    with NumPy and PyArrow (their aarch64 wheels from PyPI, installed by the emulated pip),
#    kept in $DLBRIDGE_AARCH64_HOME (default ~/.cache/dlbridge/aarch64; about 500 MB, 3 min to
#    make). Every later run updates NumPy and PyArrow to PyPI's newest (a few seconds);
# 3. the wheel: WHEEL, or the one scripts/build_dist.sh builds for linux-aarch64 (maturin
#    --zig, manylinux2014), built here in <CARGO_TARGET_DIR or target>/dist;
# 4. the smoke set, scripts/wheel_smoke.py, in the emulated interpreter (buffer-protocol and
#    DLPack round trips, the portable copy kernel's strided copies, pickle protocol 5, shared
#    memory sent to a spawned process, Arrow, bad input), then `python -m dlbridge check
#    --libraries numpy`: every case between NumPy and the reference producer, with and
#    without dlbridge; it fails on any dlbridge failure, crash or hang;
# 5. with DLBRIDGE_AARCH64_RUST=1 also the core crate's unit tests (`cargo test -p dlbridge
#    --no-default-features --lib`, the portable copy kernels' property tests among them),
#    linked by zig and run under qemu: about 3 min more, so CI leaves them out.
#
# No binfmt_misc, no chroot: nothing of the kernel's or this machine's settings is changed
# (scripts/debian_root.sh makes the root). The venv's `python` is a shell script that runs the
# root's python3.11 under qemu-aarch64-static with the script's own path as argv[0], so that
# Python finds the venv from it and every subprocess it starts (the checker's workers,
# multiprocessing's spawned children) is emulated too. The first run needs root (debootstrap);
# later ones do not. About 2-3 min warm, most of it the wheel's release build.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
HOME_DIR="${DLBRIDGE_AARCH64_HOME:-$HOME/.cache/dlbridge/aarch64}"
ROOT="$HOME_DIR/bookworm"
AVENV="$HOME_DIR/venv"

say() { printf 'aarch64_smoke: %s\n' "$*"; }
took() { say "$1 ($((SECONDS - $2)) s)"; }

if [ "$(uname -m)" != x86_64 ]; then
    say "runs on Linux x86-64 (it emulates aarch64 with qemu); this is $(uname -sm)" >&2
    exit 2
fi

# 1. the tools
# shellcheck source=scripts/debian_root.sh
. "$REPO/scripts/debian_root.sh"
debian_tools qemu-aarch64-static:qemu-user-static debootstrap:debootstrap
QEMU="$(command -v qemu-aarch64-static)"

# 2. the arm64 root, made once
start=$SECONDS
if [ ! -f "$ROOT/.dlbridge-ready" ]; then
    say "making the bookworm arm64 root in $ROOT (once)"
    debian_root arm64 bookworm "$ROOT" "$HOME_DIR/debootstrap.log" python3.11 python3.11-venv
    rm -rf "$AVENV"
    took "root made" "$start"
fi

# the venv, made once; NumPy and PyArrow updated on every run
start=$SECONDS
if [ ! -f "$AVENV/.dlbridge-ready" ]; then
    say "making the arm64 venv in $AVENV (once)"
    rm -rf "$AVENV"
    "$QEMU" -L "$ROOT" "$ROOT/usr/bin/python3.11" -m venv --without-pip "$AVENV"
    rm "$AVENV/bin/python3.11"
    cat >"$AVENV/bin/python3.11" <<EOF
#!/bin/sh
# the arm64 root's Python under emulation (scripts/aarch64_smoke.sh)
exec "$QEMU" -L "$ROOT" -0 "\$0" "$ROOT/usr/bin/python3.11" "\$@"
EOF
    chmod +x "$AVENV/bin/python3.11"
    # pip from the wheel Debian ships in the root, installing PyPI's newest pip into the venv
    pip_wheel="$(ls "$ROOT"/usr/share/python-wheels/pip-*.whl)"
    "$AVENV/bin/python" "$pip_wheel/pip" install -q --disable-pip-version-check pip
    touch "$AVENV/.dlbridge-ready"
fi
APY="$AVENV/bin/python"
"$APY" -m pip install -q --disable-pip-version-check --only-binary :all: \
    --cache-dir "$HOME_DIR/pip-cache" --upgrade numpy pyarrow
took "venv ready: $("$APY" -c 'import platform, numpy, pyarrow; print(platform.machine(), "Python", platform.python_version(), "numpy", numpy.__version__, "pyarrow", pyarrow.__version__)')" "$start"

# 3. the wheel
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
wheel="${1:-}"
VENV="$(. scripts/env.sh && printf '%s' "$DLBRIDGE_VENV")"
if [ -z "$wheel" ] || [ "${DLBRIDGE_AARCH64_RUST:-0}" = 1 ]; then
    if [ ! -x "$VENV/bin/maturin" ]; then
        say "no maturin and zig in $VENV to build for aarch64; run: bash scripts/bootstrap.sh" >&2
        exit 1
    fi
    if ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then
        rustup target add aarch64-unknown-linux-gnu
    fi
fi
if [ -z "$wheel" ]; then
    start=$SECONDS
    # the same build as scripts/build_dist.sh linux-aarch64, in the same target directory
    PATH="$VENV/bin:$PATH" CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}/dist" \
        "$VENV/bin/maturin" build --release --out "$work" --zig --compatibility manylinux2014 \
        --target aarch64-unknown-linux-gnu --interpreter "$VENV/bin/python" >"$work/build.log" 2>&1 || {
        tail -n 40 "$work/build.log" >&2
        exit 1
    }
    wheel="$(ls "$work"/dlbridge-*aarch64*.whl)"
    took "built $(basename "$wheel")" "$start"
fi
# the conformance checker: its pure-Python wheel, built here (it is the same on every platform)
"$VENV/bin/python" -m pip wheel -q --no-deps --no-build-isolation --wheel-dir "$work" ./checker
"$APY" -m pip install -q --disable-pip-version-check --no-index --no-deps --force-reinstall "$wheel"
"$APY" -m pip install -q --disable-pip-version-check --no-index --no-deps --force-reinstall \
    "$work"/dlbridge_check-*.whl

# 4. the smoke set, then the checker with NumPy, each in a directory away from the checkout
start=$SECONDS
(cd "$work" && "$APY" "$REPO/scripts/wheel_smoke.py" aarch64)
took "smoke set passed" "$start"

start=$SECONDS
(cd "$work" && "$APY" -m dlbridge check --libraries numpy --quiet --timeout 120 --json "$work/check.json" >"$work/check.log") || {
    tail -n 40 "$work/check.log" >&2
    say "python -m dlbridge check failed" >&2
    exit 1
}
"$APY" - "$work/check.json" <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
statuses = {r["status"] for r in doc["results"]}
peers = set(doc["libraries"]) - {"python", "dlpack-ref"}
assert "aarch64" in doc["platform"], doc["platform"]
assert peers == {"numpy"}, doc["libraries"]
assert doc["summary"]["dlbridge_failures"] == 0, doc["summary"]["dlbridge_failure_cases"]
assert "pass" in statuses and not statuses & {"crash", "timeout"}, statuses
by_route = doc["summary"]["by_route"]
print("aarch64_smoke: python -m dlbridge check --libraries numpy on", doc["platform"] + ":",
      len(doc["results"]), "results, through dlbridge", by_route["dlbridge"])
PYEOF
took "checker passed" "$start"

# 5. the core's unit tests on aarch64, on request: linked by zig, run by qemu
if [ "${DLBRIDGE_AARCH64_RUST:-0}" = 1 ]; then
    start=$SECONDS
    printf '#!/bin/sh\nexec "%s" -m ziglang cc -target aarch64-linux-gnu "$@"\n' "$VENV/bin/python" >"$HOME_DIR/zig-cc"
    chmod +x "$HOME_DIR/zig-cc"
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER="$HOME_DIR/zig-cc" \
        CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="$QEMU -L $ROOT" \
        cargo test -p dlbridge --no-default-features --lib --target aarch64-unknown-linux-gnu
    took "the core's unit tests passed on aarch64" "$start"
fi
