# shellcheck shell=bash
# Source this file (do not run it): `. scripts/cpython_source.sh`
#
# cpython_source: print the path of the CPython 3.14 source that dlbridge's test interpreters
# are built from (scripts/build_cpython.sh): $DLBRIDGE_FT_SOURCE when set, else the copy the
# project's machines keep beside the clone, ../shared/toolchains/cpython-3.14*.tar.xz; print
# nothing when there is none. No package registry serves that source, and an interpreter built
# from it runs tests only: nothing that ships is built with it (scripts/build_dist.sh).
cpython_source() {
    if [ -n "${DLBRIDGE_FT_SOURCE:-}" ]; then
        printf '%s\n' "$DLBRIDGE_FT_SOURCE"
        return 0
    fi
    local repo candidate
    repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    for candidate in "$repo"/../shared/toolchains/cpython-3.14*.tar.xz; do
        if [ -f "$candidate" ]; then
            realpath "$candidate"
            return 0
        fi
    done
}
