#!/usr/bin/env bash
# Build and test the examples under examples/, as a user of the crate would build them:
#   bash scripts/examples.sh
#
#   1. examples/rust-dlpack (pure Rust, a C producer compiled by build.rs): cargo fmt --check,
#      clippy -D warnings, cargo test, cargo run
#   2. examples/pyo3-extension (a PyO3 extension): cargo fmt --check, maturin build (dev
#      profile) into a temporary directory, pytest of its tests/ with that directory on
#      PYTHONPATH, then clippy -D warnings (in a target directory of its own)
#
# Each example is its own cargo workspace with its own Cargo.lock (built --locked). They use
# $CARGO_TARGET_DIR when it is set, so the dependencies they share with the repository's
# crates are not compiled twice. The venv is the one scripts/env.sh names ($DLBRIDGE_VENV);
# it needs maturin, pytest and the peers (scripts/bootstrap.sh installs them).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
# shellcheck source=scripts/env.sh
. scripts/env.sh
PY="$DLBRIDGE_VENV/bin/python"
if [ ! -x "$PY" ]; then
    echo "examples.sh: no venv at $DLBRIDGE_VENV; run: bash scripts/bootstrap.sh" >&2
    exit 1
fi
export PYO3_PYTHON="$PY"

RUST_DLPACK=examples/rust-dlpack/Cargo.toml
EXTENSION=examples/pyo3-extension/Cargo.toml

cargo fmt --manifest-path "$RUST_DLPACK" -- --check
cargo clippy --locked --manifest-path "$RUST_DLPACK" --all-targets -- -D warnings
cargo test --locked --manifest-path "$RUST_DLPACK"
cargo run --locked --quiet --manifest-path "$RUST_DLPACK"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cargo fmt --manifest-path "$EXTENSION" -- --check
"$PY" -m maturin build --locked --profile dev --manifest-path "$EXTENSION" \
    --interpreter "$PY" --out "$WORK/wheel"
# a wheel is a zip archive: unpacked, it is an importable directory (as pip would install it)
"$PY" -m zipfile -e "$WORK"/wheel/dlbridge_example-*.whl "$WORK/site"
PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m pytest -q examples/pyo3-extension/tests
# In a target directory of its own: maturin gives pyo3's build scripts an environment of its
# own (a config file, PYO3_BUILD_EXTENSION_MODULE), and clippy in the same directory would
# rerun them, making the next maturin build recompile pyo3 and dlbridge.
cargo clippy --locked --manifest-path "$EXTENSION" --all-targets \
    --target-dir "${CARGO_TARGET_DIR:-$REPO/target}/examples-clippy" -- -D warnings
