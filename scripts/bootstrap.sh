#!/usr/bin/env bash
# Install everything dlbridge needs to be built, run and tested, then build it:
#   bash scripts/bootstrap.sh
#
# 1. creates the venv at $VENV, else $DLBRIDGE_VENV, else <repo>/.venv, with CPython 3.14, the
#    interpreter most users run, when its source is at hand (scripts/cpython_source.sh: the copy
#    beside the clone on the project's machines, or DLBRIDGE_FT_SOURCE): built from it once, as a
#    GIL build, into $DLBRIDGE_CPYTHON_DIR (default ~/.cache/dlbridge/cpython314; about 10 min on
#    two idle cores) by scripts/build_cpython.sh. Without the source, the newest CPython here that the
#    main peers have wheels for (scripts/pick_python.sh newest). PYTHON overrides both. A venv
#    that is missing, broken or made with another Python version is made anew;
# 2. upgrades pip and installs requirements-test.txt, upgrading every peer to the newest
#    release the registry serves (what a fresh machine gets); a peer without a wheel for the
#    venv's Python is left out and named (its tests skip, saying it is not installed);
# 3. builds the extension and installs dlbridge into the venv: a profile-guided
#    `maturin develop --release` (scripts/pgo.sh; DLBRIDGE_PGO=0 for the plain build).
#
# Idempotent: run it as often as you like; the build is skipped when the venv holds the build of
# the same Rust sources. Long output goes to log files under
# $DLBRIDGE_LOG_DIR (default <venv>/.dlbridge-logs); on failure their tail is printed.
# Environment: PYTHON (interpreter that creates the venv, default: the probe above),
# CARGO_TARGET_DIR (honoured by maturin), DLBRIDGE_MATURIN_ARGS (extra maturin args).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
# resolve the venv path exactly as env.sh does, without exporting its loader paths here
VENV="$(. scripts/env.sh && printf '%s' "$DLBRIDGE_VENV")"
LOG_DIR="${DLBRIDGE_LOG_DIR:-$VENV/.dlbridge-logs}"

say() { printf 'bootstrap: %s\n' "$*"; }

if [ -z "${PYTHON:-}" ]; then
    # shellcheck source=scripts/cpython_source.sh
    . scripts/cpython_source.sh
    source_tarball="$(cpython_source)"
    if [ -n "$source_tarball" ]; then
        cpython_dir="${DLBRIDGE_CPYTHON_DIR:-$HOME/.cache/dlbridge/cpython314}"
        # shared, with its own path as run path: pyo3's tests link libpython from there
        PYTHON="$(bash scripts/build_cpython.sh "$source_tarball" "$cpython_dir" --enable-shared \
            "LDFLAGS=-Wl,-rpath,$cpython_dir/python/lib")"
        say "CPython 3.14 built from $source_tarball (tests only): $PYTHON"
    else
        PYTHON="$(bash scripts/pick_python.sh newest)"
    fi
fi

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

# "3.N" of an interpreter
minor_version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }

venv_ok() {
    [ -x "$VENV/bin/python" ] &&
        "$VENV/bin/python" -c 'import sys, pip; assert sys.version_info >= (3, 11)' >/dev/null 2>&1 &&
        [ "$(minor_version "$VENV/bin/python")" = "$(minor_version "$PYTHON")" ]
}

# 1. the venv
if ! venv_ok; then
    if [ -e "$VENV" ]; then
        if [ -f "$VENV/pyvenv.cfg" ]; then
            say "venv at $VENV is broken or not Python $(minor_version "$PYTHON"); recreating it"
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
if ! run_logged pip-install "$PY" -m pip install --upgrade -r requirements-test.txt 2>/dev/null; then
    # Some requirement cannot be installed here: find the peers without a wheel for this Python
    # (a dry run each) and install the rest.
    requirements=()
    no_wheel=()
    while read -r requirement; do
        case "$requirement" in "" | "#"*) continue ;; esac
        if "$PY" -m pip install -q --dry-run --no-deps --only-binary=:all: "$requirement" >/dev/null 2>&1; then
            requirements+=("$requirement")
        else
            no_wheel+=("$requirement")
        fi
    done <requirements-test.txt
    say "no wheel for Python $(minor_version "$PY"), so not installed (their tests skip): ${no_wheel[*]:-none}"
    run_logged pip-install "$PY" -m pip install --upgrade "${requirements[@]}"
fi

# 3. build and install dlbridge itself, unless the venv already holds the build of exactly
# these sources (the README's two commands back to back build once): the stamp is a hash of
# the Rust sources and manifests as they are on disk, the toolchain and the build's options.
# The Python sources need no build: the install is editable.
build_stamp() {
    {
        git ls-files -co --exclude-standard -- crates Cargo.toml Cargo.lock pyproject.toml |
            LC_ALL=C sort | xargs -d '\n' sha256sum 2>/dev/null
        rustc --version
        printf '%s\n' "$REPO" "$PY" "${DLBRIDGE_PGO:-1}" "${DLBRIDGE_MATURIN_ARGS:-}" \
            "${CARGO_TARGET_DIR:-}"
    } | sha256sum | cut -d' ' -f1
}
STAMP_FILE="$VENV/.dlbridge-build-stamp"
stamp="$(build_stamp)"
if [ -f "$STAMP_FILE" ] && [ "$(cat "$STAMP_FILE")" = "$stamp" ] &&
    "$PY" -c 'import dlbridge._native, sys; assert dlbridge._native.__file__.startswith(sys.argv[1])' \
        "$REPO/python/" >/dev/null 2>&1; then
    say "dlbridge is built from these sources already (delete $STAMP_FILE to rebuild)"
else
    rm -f "$STAMP_FILE"
    say "profile-guided maturin develop --release${CARGO_TARGET_DIR:+ (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)}"
    # shellcheck disable=SC2086  # DLBRIDGE_MATURIN_ARGS is a word list on purpose
    run_logged maturin env PYO3_PYTHON="$PY" DLBRIDGE_VENV="$VENV" \
        bash scripts/pgo.sh develop ${DLBRIDGE_MATURIN_ARGS:-}
    say "$(grep -m1 '^pgo: plain' "$LOG_DIR/maturin.log" || echo 'pgo: built with the training profile')"
    printf '%s\n' "$stamp" >"$STAMP_FILE"
fi

# 4. the conformance checker, the distribution dlbridge-check (checker/): pure Python, installed
# editable from these sources each time (a few seconds; nothing is downloaded: its build backend,
# setuptools, is in the venv, and its dependencies, dlbridge and NumPy, are installed above).
say "pip install --editable checker (dlbridge-check)"
run_logged checker "$PY" -m pip install --no-deps --no-build-isolation --editable ./checker
say "ok: $("$PY" -c 'import dlbridge, sys; print("dlbridge", getattr(dlbridge, "__version__", "?"), "from", dlbridge.__file__, "on Python", sys.version.split()[0])' 2>&1 | tail -n 1)"
