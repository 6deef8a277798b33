#!/usr/bin/env bash
# Install everything dlbridge needs to be built, run and tested, then build it:
#   bash scripts/bootstrap.sh
#
# 1. creates the venv if missing or broken (python3 -m venv), at $VENV, else
#    $DLBRIDGE_VENV, else <repo>/.venv;
# 2. upgrades pip and installs requirements-test.txt, upgrading every peer to the newest
#    release the registry serves (what a fresh machine gets);
# 3. builds the extension and installs dlbridge into the venv: a profile-guided
#    `maturin develop --release` (scripts/pgo.sh; DLBRIDGE_PGO=0 for the plain build).
#
# Idempotent: run it as often as you like. Long output goes to log files under
# $DLBRIDGE_LOG_DIR (default <venv>/.dlbridge-logs); on failure their tail is printed.
# Environment: PYTHON (interpreter that creates the venv, default python3),
# CARGO_TARGET_DIR (honoured by maturin), DLBRIDGE_MATURIN_ARGS (extra maturin args).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
# resolve the venv path exactly as env.sh does, without exporting its loader paths here
VENV="$(. scripts/env.sh && printf '%s' "$DLBRIDGE_VENV")"
PYTHON="${PYTHON:-python3}"
LOG_DIR="${DLBRIDGE_LOG_DIR:-$VENV/.dlbridge-logs}"

say() { printf 'bootstrap: %s\n' "$*"; }

# run_logged NAME CMD...: run CMD with its output in $LOG_DIR/NAME.log; print the
# log's tail and fail if it fails.
run_logged() {
    local name="$1" log
    shift
    mkdir -p "$LOG_DIR"
    log="$LOG_DIR/$name.log"
    if ! "$@" >"$log" 2>&1 </dev/null; then
        say "FAILED: $name (full log: $log); last lines:" >&2
        tail -n "${DLBRIDGE_LOG_TAIL:-80}" "$log" >&2
        return 1
    fi
}

venv_ok() {
    [ -x "$VENV/bin/python" ] &&
        "$VENV/bin/python" -c 'import sys, pip; assert sys.version_info >= (3, 11)' >/dev/null 2>&1
}

# 1. the venv
if ! venv_ok; then
    if [ -e "$VENV" ]; then
        if [ -f "$VENV/pyvenv.cfg" ]; then
            say "venv at $VENV is broken; recreating it"
            rm -rf "$VENV"
        else
            say "$VENV exists and is not a venv; move it away or set DLBRIDGE_VENV" >&2
            exit 1
        fi
    fi
    if ! "$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
        say "$PYTHON is missing or older than 3.11; set PYTHON=/path/to/python3.11+" >&2
        exit 1
    fi
    say "creating venv at $VENV with $("$PYTHON" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
    mkdir -p "$(dirname "$VENV")"
    "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"

# 2. Python dependencies
say "pip install --upgrade -r requirements-test.txt into $VENV"
run_logged pip-upgrade "$PY" -m pip install --upgrade pip
# --upgrade: every run moves the peers to the newest release the registry serves, as a fresh
# machine would get (pip's cache keeps the downloads, not the versions).
run_logged pip-install "$PY" -m pip install --upgrade -r requirements-test.txt

# 3. build and install dlbridge itself
say "profile-guided maturin develop --release${CARGO_TARGET_DIR:+ (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)}"
# shellcheck disable=SC2086  # DLBRIDGE_MATURIN_ARGS is a word list on purpose
run_logged maturin env PYO3_PYTHON="$PY" DLBRIDGE_VENV="$VENV" \
    bash scripts/pgo.sh develop ${DLBRIDGE_MATURIN_ARGS:-}
say "$(grep -m1 '^pgo: plain' "$LOG_DIR/maturin.log" || echo 'pgo: built with the training profile')"
say "ok: $("$PY" -c 'import dlbridge, sys; print("dlbridge", getattr(dlbridge, "__version__", "?"), "from", dlbridge.__file__, "on Python", sys.version.split()[0])' 2>&1 | tail -n 1)"
