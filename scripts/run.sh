#!/usr/bin/env bash
# Run a command inside the project's environment:
#   scripts/run.sh python -m dlbridge check
# The venv's bin/ comes first on PATH (so `python` is the venv's) and the dpnp
# environment of scripts/env.sh is set. The venv is $DLBRIDGE_VENV or <repo>/.venv;
# create it with scripts/bootstrap.sh.
set -euo pipefail
# shellcheck source=scripts/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
if [ ! -x "$DLBRIDGE_VENV/bin/python" ]; then
    echo "run.sh: no venv at $DLBRIDGE_VENV; run: bash scripts/bootstrap.sh" >&2
    exit 1
fi
export VIRTUAL_ENV="$DLBRIDGE_VENV"
export PATH="$DLBRIDGE_VENV/bin:$PATH"
if [ "$#" -eq 0 ]; then
    echo "usage: scripts/run.sh COMMAND [ARGS...]" >&2
    exit 2
fi
exec "$@"
