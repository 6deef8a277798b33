#!/usr/bin/env bash
# Print the path of the CPython that dlbridge's venvs are made with:
#   bash scripts/pick_python.sh newest   # the newest GIL CPython here whose pip finds wheels of
#                                        # the main peers (numpy, torch, jax, jaxlib, pyarrow)
#   bash scripts/pick_python.sh floor    # the oldest supported one (3.11, the abi3 floor)
#
# Candidates are every python3.N on PATH and under pyenv's versions (PYENV_ROOT, default
# ~/.pyenv), N from 11 up. Free-threaded builds and interpreters without a working venv module
# are passed over. "newest" asks each candidate's pip, newest first, whether the main peers'
# newest releases install as wheels there (a dry run in a throwaway venv: the registry is
# asked, nothing is installed), so a CPython that is too new for the peers is passed over too.
# Exits 1, saying why, when no candidate fits.
set -euo pipefail

MAIN_PEERS=(numpy torch jax jaxlib pyarrow)
FLOOR_MINOR=11

say() { printf 'pick_python: %s\n' "$*" >&2; }

# every interpreter file that may be a CPython 3.N, N >= FLOOR_MINOR
candidate_files() {
    local n dir
    for n in $(seq 40 -1 "$FLOOR_MINOR"); do
        command -v "python3.$n" 2>/dev/null || true
        for dir in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3."$n".*/bin; do
            [ -x "$dir/python3.$n" ] && printf '%s\n' "$dir/python3.$n"
        done
    done
}

# "MINOR MICRO PATH" of each usable GIL CPython (a venv can be made with it), newest first,
# one per minor version
usable() {
    local f
    candidate_files | while read -r f; do
        "$f" - "$f" 2>/dev/null <<'EOF' || true
import ensurepip, sys, sysconfig, venv  # noqa: F401 - a venv with pip must be possible
assert sys.implementation.name == "cpython" and not sysconfig.get_config_var("Py_GIL_DISABLED")
print(sys.version_info.minor, sys.version_info.micro, sys.executable)
EOF
    done | sort -k1,1nr -k2,2nr | sort -s -k1,1nr -u
}

# whether pip on PY finds wheels of the main peers' newest releases
has_peer_wheels() {
    local py="$1" tmp rc=0
    tmp="$(mktemp -d)"
    "$py" -m venv "$tmp/venv" >/dev/null 2>&1 &&
        "$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check --dry-run \
            --no-deps --only-binary=:all: --ignore-installed "${MAIN_PEERS[@]}" >/dev/null 2>&1 ||
        rc=1
    rm -rf "$tmp"
    return "$rc"
}

case "${1:-}" in
    newest)
        while read -r minor _ path; do
            if has_peer_wheels "$path"; then
                printf '%s\n' "$path"
                exit 0
            fi
            say "passing over Python 3.$minor ($path): no wheels of ${MAIN_PEERS[*]} for it"
        done < <(usable)
        say "no CPython >= 3.$FLOOR_MINOR here has wheels of ${MAIN_PEERS[*]}; set PYTHON=/path/to/python3"
        exit 1
        ;;
    floor)
        while read -r minor _ path; do
            if [ "$minor" = "$FLOOR_MINOR" ]; then
                printf '%s\n' "$path"
                exit 0
            fi
        done < <(usable)
        say "no CPython 3.$FLOOR_MINOR here; set DLBRIDGE_FLOOR_PYTHON=/path/to/python3.$FLOOR_MINOR"
        exit 1
        ;;
    *)
        echo "usage: bash scripts/pick_python.sh newest|floor" >&2
        exit 2
        ;;
esac
