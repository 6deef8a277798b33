#!/usr/bin/env bash
# Run every cargo-fuzz target of fuzz/ for a few seconds, starting from its committed corpus:
#   bash scripts/fuzz_smoke.sh [SECONDS] [TARGET...]
#
# SECONDS per target defaults to $DLBRIDGE_FUZZ_SECONDS, else 30; TARGETs default to all of
# `cargo fuzz list`. Targets run one after the other with AddressSanitizer (cargo-fuzz's
# default) and stop at the first crash, panic, sanitizer report, leak or slow input; the
# offending input is left in fuzz/artifacts/<target>/ and the script fails. New inputs found
# during the run go to a temporary directory: the committed corpus (fuzz/corpus/<target>/) is
# only read.
#
# Needs a nightly toolchain ($DLBRIDGE_FUZZ_TOOLCHAIN, default "nightly") and cargo-fuzz, which
# is installed with `cargo install cargo-fuzz --locked` when missing. Long runs and corpus
# minimisation: see docs/reliability.md.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO/fuzz"

SECONDS_PER="${1:-${DLBRIDGE_FUZZ_SECONDS:-30}}"
shift || true
TOOLCHAIN="${DLBRIDGE_FUZZ_TOOLCHAIN:-nightly}"

say() { printf 'fuzz_smoke: %s\n' "$*"; }

# shellcheck source=scripts/skip_or_fail.sh
. "$REPO/scripts/skip_or_fail.sh"
if ! cargo "+$TOOLCHAIN" --version >/dev/null 2>&1; then
    # cargo-fuzz needs nightly; a machine without it skips the smoke loudly rather than
    # failing the whole test run (the fuzz targets are also built by nothing else), except in CI
    skip_or_fail fuzz_smoke "no $TOOLCHAIN toolchain (rustup toolchain install $TOOLCHAIN to run it)"
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    say "installing cargo-fuzz (cargo install cargo-fuzz --locked)"
    cargo install cargo-fuzz --locked >/dev/null
fi

if [ "$#" -gt 0 ]; then
    TARGETS=("$@")
else
    mapfile -t TARGETS < <(cargo "+$TOOLCHAIN" fuzz list)
fi

SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT

say "building the fuzz targets (nightly, AddressSanitizer)"
if ! cargo "+$TOOLCHAIN" fuzz build -O >"$SCRATCH/build.log" 2>&1; then
    say "build FAILED; log tail:" >&2
    tail -n 40 "$SCRATCH/build.log" >&2
    exit 1
fi

for target in "${TARGETS[@]}"; do
    mkdir -p "corpus/$target" "$SCRATCH/$target"
    log="$SCRATCH/$target.log"
    say "$target: ${SECONDS_PER}s from $(find "corpus/$target" -type f | wc -l) corpus inputs"
    # New inputs go to the scratch directory (the first one); the committed corpus is read.
    if ! cargo "+$TOOLCHAIN" fuzz run -O "$target" "$SCRATCH/$target" "corpus/$target" -- \
        -max_total_time="$SECONDS_PER" -timeout=10 -print_final_stats=1 >"$log" 2>&1; then
        say "$target FAILED; log tail:" >&2
        tail -n 60 "$log" >&2
        say "reproduce: cd fuzz && cargo +$TOOLCHAIN fuzz run -O $target fuzz/artifacts/$target/<file>" >&2
        exit 1
    fi
    runs="$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$' || true)"
    say "$target: ok (${runs:-?} executions)"
done
