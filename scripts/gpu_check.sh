#!/usr/bin/env bash
# CUDA on a real GPU: the core crate's GPU tests, the Python CUDA tests, the transfer benchmark,
# the checker with the GPU libraries and the whole test suite, in that order.
#
#   bash scripts/gpu_check.sh prepare   # where Rust is: fills .gpu/ with the Linux x86-64
#                                       # wheel and the core crate's unit-test binary
#   bash scripts/gpu_check.sh run       # on the GPU machine, from the repository root (with
#                                       # .gpu/ copied there): logs under $OUT (default .gpu/out)
#
# The GPU machine needs neither Rust nor a network: `python3` there (or $GPU_CHECK_PYTHON)
# must have torch with CUDA, numpy, pytest and hypothesis; CuPy, JAX and pyarrow are used
# where they are installed. The wheel is installed into a folder of its own on PYTHONPATH, so
# the interpreter's packages stay as they are. Each step has a time limit (seconds, below) and
# a failing step does not stop the next; $OUT/summary.txt says what each step did. The steps
# together stay under 8 minutes; GPU_CHECK_STEPS="rust pytest" runs a subset, GPU_CHECK_DIR
# names another folder than .gpu.
#
# Files under $OUT: summary.txt, rust.log, pytest.log (the CUDA tests), bench.log, gpu.md (the
# benchmark table, for benches/results/gpu.md), check.log, check.json, all.log (the whole suite).

set -uo pipefail
cd "$(dirname "$0")/.."
GPU_DIR=${GPU_CHECK_DIR:-.gpu}

prepare() {
    set -e
    mkdir -p "$GPU_DIR"
    rm -f "$GPU_DIR"/*.whl "$GPU_DIR"/dlbridge-unit
    bash scripts/build_dist.sh linux-x86_64
    cp dist/dlbridge-*-manylinux*_x86_64.whl dist/dlbridge_check-*.whl "$GPU_DIR"/
    # The core crate's unit tests with its default features (the CUDA loader, no Python): a
    # binary that needs only the C library, run there with the GPU tests included.
    local exe
    exe=$(cargo test -p dlbridge --lib --release --no-run --message-format=json 2>/dev/null \
        | python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "dlbridge":
        print(m["executable"])')
    cp "$exe" "$GPU_DIR"/dlbridge-unit
    strip "$GPU_DIR"/dlbridge-unit 2>/dev/null || true
    ls -l "$GPU_DIR"
    echo "prepared $GPU_DIR: carry it to the GPU machine and run 'bash scripts/gpu_check.sh run'"
}

OUT=${OUT:-$GPU_DIR/out}
PY=${GPU_CHECK_PYTHON:-python3}
STEPS=${GPU_CHECK_STEPS:-rust pytest bench check all}

say() { echo "$*" | tee -a "$OUT/summary.txt"; }

# step NAME SECONDS CMD...: run CMD with its output in $OUT/NAME.log, and say how it ended.
step() {
    local name=$1 limit=$2 start rc
    shift 2
    case " $STEPS " in *" $name "*) ;; *) return 0 ;; esac
    start=$(date +%s)
    timeout -k 10 "$limit" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    local why=""
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && why=" (stopped at its ${limit} s limit)"
    say "$name: exit $rc in $(($(date +%s) - start)) s$why; last line: $(grep -v "^[[:space:]]*$" "$OUT/$name.log" | tail -n 1)"
}

machine() {
    say "# gpu_check $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    say "$(nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv 2>&1)"
    say "$("$PY" - <<'EOF' 2>&1
import importlib, platform
print("python", platform.python_version())
for name in ["numpy", "torch", "cupy", "jax", "jaxlib", "pyarrow", "ml_dtypes", "pytest", "hypothesis"]:
    try:
        m = importlib.import_module(name)
        print(name, getattr(m, "__version__", "?"))
    except Exception as e:
        print(name, "not usable:", type(e).__name__, str(e).splitlines()[0][:120] if str(e) else "")
import torch
print("torch CUDA", torch.version.cuda, "available", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
EOF
)"
}

install() {
    local site=/tmp/dlbridge-site wheel
    wheel=$(ls "$GPU_DIR"/dlbridge-*.whl 2>/dev/null | head -n 1)
    if [ -z "$wheel" ]; then
        say "no wheel in $GPU_DIR: run 'bash scripts/gpu_check.sh prepare' where Rust is"
        exit 2
    fi
    rm -rf "$site"
    # with the conformance checker's wheel, which the check step runs
    if ! "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$site" "$wheel" \
        "$GPU_DIR"/dlbridge_check-*.whl >>"$OUT/summary.txt" 2>&1; then
        say "installing $wheel failed"
        exit 2
    fi
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
    say "installed $(basename "$wheel"); $("$PY" -c 'import dlbridge, numpy
t = dlbridge.from_dlpack(numpy.arange(3.0)).to_device("cuda:0")
print("dlbridge", dlbridge.__version__, "from", dlbridge.__file__, "copied to", t.device)' 2>&1 | tail -n 1)"
}

run() {
    mkdir -p "$OUT"
    : >"$OUT/summary.txt"
    export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
    machine
    install
    local pytest=("$PY" -m pytest -p no:cacheprovider -o addopts= -rfEs)
    # (the stand-in's own tests need the stand-in: scripts/cuda_standin_test.sh runs them)
    step rust 60 "$GPU_DIR"/dlbridge-unit --include-ignored --test-threads 8 --skip standin_tests
    step pytest 120 "${pytest[@]}" -v tests/test_cuda.py tests/interop/test_cupy.py \
        tests/test_leaks.py::test_c20_device_memory_flat \
        tests/interop/test_arrow.py::test_cuda_device_array_with_sync_event_round_trip
    step bench 90 "$PY" benches/bench_gpu.py --out "$OUT/gpu.md"
    step check 120 "$PY" -m dlbridge check -q --libraries numpy,torch,cupy,jax,pyarrow \
        --json "$OUT/check.json"
    local workers=()
    "$PY" -c 'import xdist' 2>/dev/null && workers=(-n 8)
    step all 120 "${pytest[@]}" -q "${workers[@]}" tests
    say "done"
}

case "${1:-}" in
prepare) prepare ;;
run) run ;;
*)
    echo "usage: bash scripts/gpu_check.sh prepare|run" >&2
    exit 2
    ;;
esac
