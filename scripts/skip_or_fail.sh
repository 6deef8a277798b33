# shellcheck shell=bash
# Source this file (do not run it): `. scripts/skip_or_fail.sh`
#
# skip_or_fail NAME REASON...: a step that cannot run here (no nightly toolchain, a component
# rustup cannot add) says so and exits. Locally it is SKIPPED (exit 0), so that a machine
# without nightly still runs the rest; under CI=true it FAILED (exit 1), since CI installs what
# these steps need and a check that silently does not run is a check that passes for nothing.
skip_or_fail() {
    local name="$1"
    shift
    if [ "${CI:-}" = true ]; then
        printf '%s: FAILED: %s (CI=true: every step must run)\n' "$name" "$*" >&2
        exit 1
    fi
    printf '%s: SKIPPED: %s\n' "$name" "$*" >&2
    exit 0
}
