#!/usr/bin/env bash
# Everything CI checks, in order, stopping at the first failure:
#   bash scripts/test.sh [PYTEST ARGS...]
#
#   0. scripts/bootstrap.sh (venv, test dependencies, maturin develop --release);
#      skip it with DLBRIDGE_SKIP_BOOTSTRAP=1
#      ruff; mypy on the package with the peers and without any installed package; the
#      type stubs checked against the built module (python -m mypy.stubtest dlbridge)
#   1. cargo fmt --all -- --check
#   2. cargo clippy --workspace --all-targets --all-features -- -D warnings
#      cargo clippy -p dlbridge --all-targets -- -D warnings   (the pure-Rust build)
#      bash scripts/cross_check.sh: the same clippy for Windows, macOS (Arm, Intel) and Linux
#      on Arm, the targets added with rustup when missing (DLBRIDGE_SKIP_CROSS=1 skips it)
#      bash scripts/msrv_check.sh: cargo check --workspace --all-targets with the rust-version, and with
#      arrow-rs's minimum for that feature (DLBRIDGE_SKIP_MSRV=1 skips it)
#      the ABI check: dlbridge's "pyo3" feature must not choose pyo3's abi3 (only the
#      wheel's cdylib does), so that extensions depending on dlbridge keep their own choice
#      the crate's API docs: cargo doc -p dlbridge --all-features --no-deps with
#      RUSTDOCFLAGS=-D warnings (a broken intra-doc link fails) and as docs.rs builds them
#      (nightly, --cfg docsrs; skipped loudly without it, a failure under CI=true, as for
#      every nightly step below: scripts/skip_or_fail.sh), and the published crate's file
#      list (cargo package --list: the license files and README must be in it)
#      the public API: python3 scripts/public_api.py --check lists every public item from
#      rustdoc's JSON (nightly; skipped loudly without it) and fails when the list differs
#      from docs/rust-public-api.txt (--update rewrites it after a change made on purpose)
#   3. cargo test --workspace --exclude dlbridge-py --all-features
#      cargo test -p dlbridge --no-default-features   (no CUDA loader, no Python)
#      bash scripts/cuda_standin_test.sh: the crate's CUDA tests, the GPU ones included, against
#      the CUDA stand-in (Linux; it also gives pytest the stand-in for test_cuda_standin.py)
#      bash scripts/asan_test.sh: the core's unit tests under AddressSanitizer (nightly;
#      skipped loudly without it; DLBRIDGE_SKIP_ASAN=1 skips it)
#      bash scripts/miri_test.sh: the core's unit tests under Miri (nightly with the miri
#      component, added by the script; DLBRIDGE_SKIP_MIRI=1 skips it)
#      bash scripts/tsan_test.sh: the tests that use threads under ThreadSanitizer (nightly,
#      -Zbuild-std; DLBRIDGE_SKIP_TSAN=1 skips it)
#      bash scripts/fuzz_smoke.sh (30 s per fuzz target; DLBRIDGE_SKIP_FUZZ=1 skips it)
#      (dlbridge-py is a cdylib built with pyo3's extension-module: its test harness
#      cannot link against libpython; it is covered by clippy and by pytest)
#      bash scripts/examples.sh: build and test examples/ (a pure-Rust DLPack consumer of a C
#      producer; a PyO3 extension built with maturin, with its own pytest), in the same cargo
#      target directory (DLBRIDGE_SKIP_EXAMPLES=1 skips it)
#      bash scripts/aarch64_smoke.sh: the Linux aarch64 wheel built and run under qemu in an
#      arm64 Debian root kept in ~/.cache/dlbridge/aarch64 (its smoke set and the checker with
#      NumPy); DLBRIDGE_SKIP_AARCH64=1 skips it
#      bash scripts/py315_smoke.sh: the abi3 and the abi3t wheel, each installed into CPython
#      3.15 (Debian unstable's python3.15, in a root kept in ~/.cache/dlbridge/py315): the smoke
#      set and the main job with the peers that have 3.15 wheels; SKIPPED without root or
#      network to make the root, FAILED then under CI=true; DLBRIDGE_SKIP_PY315=1 skips it
#   4. bash scripts/docs.sh: the documentation site in strict mode (a broken link fails)
#      python benches/run_quick.py: the quick mode of every benchmark, tables printed to the
#      log, no timing asserted; a benchmark's build (--prepare) runs outside its time limit
#      (DLBRIDGE_SKIP_BENCH=1 skips it)
#      the main job: python -m dlbridge check over every installed peer, to the end; it fails
#      when dlbridge itself fails a case (its report and JSON are kept in the log directory);
#      DLBRIDGE_SKIP_CHECK=1 skips it
#      bash scripts/freethreaded.sh: the main job and the suite on free-threaded CPython 3.14
#      with the GIL off, against the cp314t wheel, when a CPython 3.14 source is at hand
#      (DLBRIDGE_FT_SOURCE, or the copy beside the clone: scripts/cpython_source.sh; the
#      interpreter is built from it once and cached); DLBRIDGE_SKIP_FREETHREADED=1 skips it
#   5. python -m pytest [PYTEST ARGS...]  with the venv's python and scripts/env.sh
#      (dpnp's SYCL device); a per-test --timeout (DLBRIDGE_PYTEST_TIMEOUT, default 300 s)
#      comes first, so a --timeout in the arguments overrides it. With DLBRIDGE_TEST_DIST=1 (CI)
#      it builds the release wheel and also runs a smoke subset of the suite with it in a
#      CPython 3.11 venv ($DLBRIDGE_FLOOR_VENV, default <repo>/.venv-floor).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

step() {
    printf '\n==> %s\n' "$*"
    local start=$SECONDS
    "$@"
    printf '<== ok (%ss): %s\n' "$((SECONDS - start))" "$1 ${2:-}"
}

if [ "${DLBRIDGE_SKIP_BOOTSTRAP:-0}" != 1 ]; then
    step bash scripts/bootstrap.sh
fi

VENV="$(. scripts/env.sh && printf '%s' "$DLBRIDGE_VENV")"
PY="$VENV/bin/python"
if [ ! -x "$PY" ]; then
    echo "test.sh: no venv at $VENV; run: bash scripts/bootstrap.sh" >&2
    exit 1
fi
# the same interpreter for every pyo3 build (maturin, clippy, test): no needless rebuilds
export PYO3_PYTHON="$PY"
# The venv keeps its path when bootstrap remakes it with a newer Python, and cargo reruns
# pyo3's build scripts only when their inputs change: the interpreter's signature (written as
# maturin writes it) is one, so cached builds never keep the old interpreter's configuration.
PYO3_ENVIRONMENT_SIGNATURE="$("$PY" -c 'import struct, sys, sysconfig
ft = "t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""
bits = struct.calcsize("P") * 8
print(f"{sys.implementation.name}-{sys.version_info[0]}.{sys.version_info[1]}{ft}-{bits}bit")')"
export PYO3_ENVIRONMENT_SIGNATURE

# Python: ruff (the rules and line length in pyproject.toml) and mypy on the whole package,
# twice: with the peers installed (their types are read) and with no installed package at all
# (--no-site-packages: every peer, NumPy too, unknown to mypy), as dlbridge needs none of them;
# the second run keeps its own cache (about 3 s of CPU cold, under 1 s warm).
step "$PY" -m ruff check python checker tests benches scripts
step "$PY" -m mypy -p dlbridge -p dlbridge_check -p _dlbridge_pytest
step "$PY" -m mypy --no-site-packages --cache-dir .mypy_cache/no-site-packages -p dlbridge -p dlbridge_check -p _dlbridge_pytest
# The extension's type stub (_native.pyi) against the built module, and every other module
# against itself at run time: names, signatures, positional-only arguments, @final classes.
# The allowlist holds only what stubtest cannot express (each entry says why). About a minute
# of CPU: stubtest type-checks the standard library's stubs afresh on every run.
stubtest() {
    PYTHONPATH="$REPO/python" "$PY" -m mypy.stubtest --mypy-config-file pyproject.toml \
        --allowlist scripts/stubtest-allowlist.txt dlbridge
}
step stubtest

step cargo fmt --all -- --check
step cargo clippy --workspace --all-targets --all-features -- -D warnings
step cargo clippy -p dlbridge --all-targets -- -D warnings
[ "${DLBRIDGE_SKIP_CROSS:-0}" = 1 ] || step bash scripts/cross_check.sh
# the Rust versions the manifest and the docs promise (rustup installs them when missing)
[ "${DLBRIDGE_SKIP_MSRV:-0}" = 1 ] || step bash scripts/msrv_check.sh

# pyo3's ABI is the extension's choice: dlbridge's "pyo3" feature must turn on no abi3*.
no_abi3_from_dlbridge() {
    local tree
    tree="$(cargo tree -p dlbridge --features pyo3 -e features -i pyo3)"
    if grep abi3 <<<"$tree"; then
        echo "test.sh: dlbridge's pyo3 feature turns on pyo3's abi3 (above); only crates/dlbridge-py may" >&2
        return 1
    fi
}
step no_abi3_from_dlbridge

RUSTDOCFLAGS="-D warnings" step cargo doc -p dlbridge --all-features --no-deps

# The API docs as docs.rs builds them: nightly with --cfg docsrs, so that every feature-gated
# item says which feature it needs. Skipped loudly without a nightly toolchain.
docs_rs_build() {
    if ! cargo +nightly --version >/dev/null 2>&1; then
        # a subshell: skip_or_fail exits
        (. "$REPO/scripts/skip_or_fail.sh" &&
            skip_or_fail "test.sh: docs.rs build" "no nightly toolchain (rustup toolchain install nightly to run it)")
        return
    fi
    RUSTDOCFLAGS="--cfg docsrs -D warnings" cargo +nightly doc -p dlbridge --all-features --no-deps
}
step docs_rs_build

# The public API, item by item: an API change must change docs/rust-public-api.txt too.
step "$PY" scripts/public_api.py --check

# What `cargo publish` would upload: the manifest is valid and the crate carries its licenses.
crate_has_licenses() {
    local files
    files="$(cargo package -p dlbridge --allow-dirty --no-verify --list)"
    for f in LICENSE-MIT LICENSE-APACHE README.md; do
        if ! grep -qx "$f" <<<"$files"; then
            echo "test.sh: the packaged dlbridge crate lacks $f" >&2
            return 1
        fi
    done
}
step crate_has_licenses

# Rust tests with the "pyo3" feature link libpython: load the one the venv was made from.
PY_LIBDIR="$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR") or "")')"
# shellcheck disable=SC2031  # a prefix assignment for this one command, on purpose
LD_LIBRARY_PATH="$PY_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    step cargo test --workspace --exclude dlbridge-py --all-features
step cargo test -p dlbridge --no-default-features

# dlbridge's CUDA code against the CUDA stand-in (a strict test double of libcuda): the crate's
# GPU tests and the stand-in's own, here; tests/test_cuda_standin.py in the pytest step below
# finds the library through DLBRIDGE_CUDA_STANDIN. Linux only; about 30 s warm here, 10 s of
# pytest.
if [ "$(uname -s)" = Linux ]; then
    # shellcheck disable=SC2031  # a prefix assignment for this one command, on purpose
    LD_LIBRARY_PATH="$PY_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        step bash scripts/cuda_standin_test.sh
    DLBRIDGE_CUDA_STANDIN="$(bash scripts/cuda_standin_test.sh --path)"
    export DLBRIDGE_CUDA_STANDIN
fi

# The core's unit tests under AddressSanitizer (nightly), in their own target directory.
[ "${DLBRIDGE_SKIP_ASAN:-0}" = 1 ] || step bash scripts/asan_test.sh

# Undefined behaviour in the core's unit tests under Miri, and data races in the tests that use
# threads under ThreadSanitizer (nightly; each script installs the components it needs).
[ "${DLBRIDGE_SKIP_MIRI:-0}" = 1 ] || step bash scripts/miri_test.sh
[ "${DLBRIDGE_SKIP_TSAN:-0}" = 1 ] || step bash scripts/tsan_test.sh

# A short run of every fuzz target from its committed corpus (nightly, AddressSanitizer).
[ "${DLBRIDGE_SKIP_FUZZ:-0}" = 1 ] || step bash scripts/fuzz_smoke.sh "${DLBRIDGE_FUZZ_SECONDS:-30}"

[ "${DLBRIDGE_SKIP_EXAMPLES:-0}" = 1 ] || step bash scripts/examples.sh

# The aarch64 wheel, installed and used under emulation (about 1 min warm plus its build).
[ "${DLBRIDGE_SKIP_AARCH64:-0}" = 1 ] || step bash scripts/aarch64_smoke.sh

# The abi3 and abi3t wheels on CPython 3.15 (a Debian root made once).
[ "${DLBRIDGE_SKIP_PY315:-0}" = 1 ] || step bash scripts/py315_smoke.sh

step bash scripts/docs.sh

# Every benchmark's quick mode, so a speed regression shows in every CI log (shared machines:
# the tables are read, not asserted; a benchmark that crashes fails the step).
[ "${DLBRIDGE_SKIP_BENCH:-0}" = 1 ] || step "$REPO/scripts/run.sh" python benches/run_quick.py

# The main job, as the README runs it: every pair of installed peers, directly and through
# dlbridge. Its exit status is dlbridge's own (a peer's changed behaviour is a finding, not a
# failure); the report lists the versions it checked.
main_job() {
    local log_dir="${DLBRIDGE_LOG_DIR:-$VENV/.dlbridge-logs}"
    mkdir -p "$log_dir"
    "$REPO/scripts/run.sh" python -m dlbridge check --json "$log_dir/check.json"
}
[ "${DLBRIDGE_SKIP_CHECK:-0}" = 1 ] || step main_job

# The suite and the main job again on free-threaded CPython 3.14 with the GIL off, against the
# cp314t wheel, when a CPython 3.14 source is at hand (SKIPPED without one; FAILED under
# CI=true, where .ci/run sets DLBRIDGE_FT_SOURCE).
DLBRIDGE_FT_SOURCE="$(. scripts/cpython_source.sh && cpython_source)"
export DLBRIDGE_FT_SOURCE
[ "${DLBRIDGE_SKIP_FREETHREADED:-0}" = 1 ] || step bash scripts/freethreaded.sh

"$PY" - <<'PYEOF'
import re
from importlib import metadata

from dlbridge.libraries import known_libraries

# the libraries dlbridge knows, by the distributions their pip specs name (dlbridge's published
# list), then the peers that are not targets of their own
names = ["dlbridge", "dlbridge-check"]
for lib in known_libraries():
    for spec in lib.pip.split():
        dist = re.split(r"[\[<>=!~; ]", spec, maxsplit=1)[0]
        if dist not in names:
            names.append(dist)
names += ["jaxlib", "nanoarrow", "arro3-core", "ml_dtypes", "polars", "dpctl", "ray", "dask",
          "distributed", "hypothesis", "pytest"]
def v(n):
    try:
        return metadata.version(n)
    except metadata.PackageNotFoundError:
        return "-"
print("\npeers: " + ", ".join(f"{n} {v(n)}" for n in names))
PYEOF

# last, and exec'd, so that pytest's summary is the run's closing line and its exit
# code (including 5, "no tests collected") is the script's
printf '\n==> pytest %s\n' "$*"
exec "$REPO/scripts/run.sh" python -m pytest --timeout="${DLBRIDGE_PYTEST_TIMEOUT:-300}" "$@"
