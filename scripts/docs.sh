#!/usr/bin/env bash
# Build the documentation site (MkDocs, Material theme, mkdocstrings) in strict mode:
#   bash scripts/docs.sh          # builds into site/ (git-ignored); fails on any warning:
#                                 # a broken link or anchor, a missing page or reference
#   bash scripts/docs.sh serve    # serves it on http://127.0.0.1:8000 with live reload
#
# Uses the project's venv (scripts/bootstrap.sh installs the tools from
# requirements-test.txt). Needs neither the compiled extension nor any peer library: the
# API reference is read from the type stubs.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
VENV="$(. scripts/env.sh && printf '%s' "$DLBRIDGE_VENV")"
if [ ! -x "$VENV/bin/mkdocs" ]; then
    echo "docs.sh: no mkdocs in $VENV; run: bash scripts/bootstrap.sh" >&2
    exit 1
fi
# Material prints a banner about its successor on every build; it is not a problem of ours
export NO_MKDOCS_2_WARNING=1

if [ "${1:-build}" = serve ]; then
    exec "$VENV/bin/mkdocs" serve --strict
fi
exec "$VENV/bin/mkdocs" build --strict --clean --quiet
