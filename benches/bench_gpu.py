#!/usr/bin/env python3
"""CUDA transfer speed: host to device, device to host and device to device, against torch
(and CuPy where it runs).

    python benches/bench_gpu.py            # full run, writes benches/results/gpu.md
    python benches/bench_gpu.py --quick    # smoke test, writes benches/results/gpu-quick.md

Needs an NVIDIA GPU and torch with CUDA; without them it says so, measures nothing and exits
with status 0 (``benches/run_quick.py`` runs it on CPU-only CI machines too).

Each group moves the same 256 MiB (``--mib``) with dlbridge and its peers in one process, one
call per sample, samples interleaved (the order rotates every sample). Every statement ends
with ``torch.cuda.synchronize()``, so a sample is the whole transfer, allocation of the result
included on every side; results are dropped right after, so freeing is part of it too (torch
and CuPy keep freed blocks in their caching allocators, dlbridge returns them to the driver).
The table gives min and median ms, the median's bandwidth in GB/s (bytes moved once; a
device-to-device copy reads and writes them), and for each peer the speed ratio peer median /
dlbridge median (above 1.0 means dlbridge is faster). The machine's own limit is beside them:
the PCIe link's raw rate for host transfers, the memory's peak bandwidth for device copies.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import (
    command_line,
    cpu_model,
    error_name,
    fmt_ratio,
    format_versions,
    git_rev,
    loadavg,
    make_once,
    native_build,
    sample_interleaved,
    try_import,
    utc_now,
    write_results,
)

FULL = {"samples": 21, "warmup": 3}
QUICK = {"samples": 5, "warmup": 1}

# GT/s per lane and payload bits per transferred bit, by PCIe generation.
PCIE = {1: (2.5, 8 / 10), 2: (5.0, 8 / 10), 3: (8.0, 128 / 130), 4: (16.0, 128 / 130),
        5: (32.0, 128 / 130), 6: (64.0, 242 / 256)}


def nvidia_smi(fields: str) -> list[str]:
    """``nvidia-smi --query-gpu=<fields>`` for GPU 0, one string per field; [] on failure."""
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [f.strip() for f in out.strip().split(",")]


def pcie_limit() -> tuple[float | None, str]:
    """The PCIe link's raw payload rate in GB/s (one direction) and how it was found."""
    gen_width = nvidia_smi("pcie.link.gen.current,pcie.link.width.current")
    try:
        gen, width = int(gen_width[0]), int(gen_width[1])
    except (IndexError, ValueError):
        return None, "PCIe link unknown (nvidia-smi gave none)"
    rate, efficiency = PCIE.get(gen, (None, None))
    if rate is None:
        return None, f"PCIe gen {gen} x{width} (unknown rate)"
    return rate * width * efficiency / 8, f"PCIe gen {gen} x{width}, as nvidia-smi reports it"


def memory_limit(torch: Any) -> tuple[float | None, str]:
    """The GPU memory's peak bandwidth in GB/s, from its clock and bus width."""
    props = torch.cuda.get_device_properties(0)
    clock_khz = getattr(props, "memory_clock_rate", None)
    bus_bits = getattr(props, "memory_bus_width", None)
    if not clock_khz or not bus_bits:
        return None, "memory bandwidth unknown (torch gives no memory clock or bus width)"
    gbs = 2 * clock_khz * 1e3 * bus_bits / 8 / 1e9
    return gbs, f"{bus_bits}-bit bus at {clock_khz / 1e3:.0f} MHz, double data rate"


def groups(nbytes: int, has_cupy: bool) -> list[dict[str, Any]]:
    """The groups: title, the setup's description, bytes moved per call, the limit's kind, the
    target (a peer label and the ratio dlbridge must reach), and (label, statement) rows,
    dlbridge's first."""
    sync = "; sync()"
    g = [
        {"title": "Host to device from pinned memory",
         "setup": "p = torch.empty(n, pin_memory=True) (labelled kDLCPU by torch); "
                  "tp = dlbridge.from_dlpack(p)",
         "moved": nbytes, "limit": "pcie", "target": ("p.cuda()", 0.9),
         "rows": [("tp.to_device('cuda:0')", "tp.to_device('cuda:0')" + sync),
                  ("p.cuda()", "p.cuda()" + sync),
                  ("p.to('cuda', non_blocking=True)", "p.to('cuda', non_blocking=True)" + sync)]},
        {"title": "Host to device from pageable memory",
         "setup": "a = numpy array; ta = dlbridge.from_dlpack(a); pa = torch.from_numpy(a)",
         "moved": nbytes, "limit": "pcie", "target": None,
         "rows": [("ta.to_device('cuda:0')", "ta.to_device('cuda:0')" + sync),
                  ("pa.cuda()", "pa.cuda()" + sync)]},
        {"title": "Device to host, into new pageable memory",
         "setup": "x = torch.empty(n, device='cuda'); tx = dlbridge.from_dlpack(x)",
         "moved": nbytes, "limit": "pcie", "target": ("x.cpu()", 0.9),
         "rows": [("tx.to_device('cpu')", "tx.to_device('cpu')" + sync),
                  ("dlbridge.to_numpy(x)", "dlbridge.to_numpy(x)" + sync),
                  ("x.cpu()", "x.cpu()" + sync)]},
        {"title": "Device to host, into new pinned memory",
         "setup": "as above; torch's pinned blocks come from its caching host allocator",
         "moved": nbytes, "limit": "pcie", "target": None,
         "rows": [("tx.to_device('cuda_host')", "tx.to_device('cuda_host')" + sync),
                  ("torch.empty(n, pin_memory=True).copy_(x)",
                   "torch.empty(n, pin_memory=True, dtype=torch.uint8).copy_(x)" + sync)]},
        {"title": "Device to device copy",
         "setup": "as above",
         "moved": 2 * nbytes, "limit": "memory", "target": ("x.clone()", 0.9),
         "rows": [("tx.copy()", "tx.copy()" + sync),
                  ("x.clone()", "x.clone()" + sync)]},
    ]
    if has_cupy:
        g[1]["rows"].append(("cp.asarray(a)", "cp.asarray(a)" + sync))
        g[2]["rows"].append(("cp.asnumpy(cx)", "cp.asnumpy(cx)" + sync))
        g[4]["rows"].append(("cx.copy()", "cx.copy()" + sync))
    return g


def run_group(group: dict[str, Any], ns: dict[str, Any], samples: int, warmup: int,
              limits: dict[str, tuple[float | None, str]]) -> list[str]:
    """Time one group and return its Markdown lines."""
    fns: list[Any] = []
    failed: dict[int, BaseException] = {}
    for i, (_, stmt) in enumerate(group["rows"]):
        fn = make_once(stmt, ns)
        try:
            for _ in range(warmup + 1):
                fn()
            fns.append(fn)
        except Exception as exc:  # noqa: BLE001 - reported in the table
            failed[i] = exc
            fns.append(None)
    values, errors = sample_interleaved(fns, samples)
    medians: dict[int, float] = {}
    for i, err in enumerate(errors):
        if err is not None:
            failed[i] = err
        elif values[i]:
            medians[i] = statistics.median(values[i])
    limit, how = limits[group["limit"]]
    lines = [f"### {group['title']}", "", f"{group['setup']}.", "",
             "| statement | ms (min / median) | GB/s (median) | speed of dlbridge vs this |",
             "|---|---:|---:|---:|"]
    for i, (label, _) in enumerate(group["rows"]):
        if i in failed:
            detail = str(failed[i]).splitlines()[0][:120] if str(failed[i]) else ""
            lines.append(f"| `{label}` | {error_name(failed[i])}: {detail} | | |")
            continue
        med = medians[i]
        gbs = group["moved"] / med / 1e9
        ratio = "(dlbridge)" if i == 0 else fmt_ratio(med / medians[0] if 0 in medians else None)
        lines.append(f"| `{label}` | {min(values[i]) * 1e3:.2f} / {med * 1e3:.2f} | "
                     f"{gbs:.1f} | {ratio} |")
    lines += ["", f"Limit: {limit:.0f} GB/s ({how})." if limit else f"Limit: {how}."]
    target = group["target"]
    if target:
        peer, want = target
        labels = [label for label, _ in group["rows"]]
        j = labels.index(peer)
        if 0 in medians and j in medians:
            got = medians[j] / medians[0]
            verdict = "met" if got >= want else "**not met**"
            lines.append(f"Target: dlbridge >= {want}x the speed of `{peer}`: {got:.2f}x — "
                         f"{verdict}.")
        else:
            lines.append(f"Target: dlbridge >= {want}x the speed of `{peer}`: not measured.")
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples, 32 MiB")
    parser.add_argument("--mib", type=int, default=None, help="bytes moved per call, in MiB")
    parser.add_argument("--out", type=Path, default=None, help="where to write the table")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args(argv)
    torch = try_import("torch")
    if torch is None or not torch.cuda.is_available():
        print("bench_gpu: needs an NVIDIA GPU and torch with CUDA; none here, nothing measured")
        return 0
    import numpy as np

    import dlbridge

    cp = try_import("cupy")
    if cp is not None:
        try:
            cp.cuda.runtime.getDeviceCount()
        except Exception:  # noqa: BLE001 - CuPy present but unusable: leave its rows out
            cp = None
    mode = QUICK if args.quick else FULL
    mib = args.mib or (32 if args.quick else 256)
    nbytes = mib << 20
    a = np.ones(nbytes, dtype=np.uint8)
    p = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True).fill_(1)
    x = torch.ones(nbytes, dtype=torch.uint8, device="cuda")
    ns: dict[str, Any] = {
        "torch": torch, "dlbridge": dlbridge, "np": np, "cp": cp, "a": a, "p": p, "x": x,
        "n": nbytes, "sync": torch.cuda.synchronize,
        "ta": dlbridge.from_dlpack(a), "pa": torch.from_numpy(a),
        "tp": dlbridge.from_dlpack(p), "tx": dlbridge.from_dlpack(x),
    }
    if cp is not None:
        ns["cx"] = cp.from_dlpack(x)
    torch.cuda.synchronize()
    limits = {"pcie": pcie_limit(), "memory": memory_limit(torch)}
    name = torch.cuda.get_device_name(0)
    driver = nvidia_smi("driver_version")
    header = [
        f"# CUDA transfers: {mib} MiB host to device, device to host, device to device",
        "",
        "Generated by `benches/bench_gpu.py`. Quote the ratios (every statement of a group "
        "measured in this one run, samples interleaved); absolute times are for this machine "
        "only.",
        "",
        f"- date: {utc_now()}",
        f"- command: `{command_line('benches/bench_gpu.py', argv)}`",
        f"- mode: {'quick' if args.quick else 'full'}; {mode['samples']} samples of one call "
        f"per statement, {mode['warmup']} warm-up calls, gc disabled while timing",
        f"- GPU: {name}, driver {driver[0] if driver else 'unknown'}, "
        f"CUDA runtime of torch {torch.version.cuda}",
        f"- Python: {platform.python_implementation()} {platform.python_version()}",
        f"- versions: {format_versions({'dlbridge': dlbridge, 'torch': torch, 'cupy': cp})}",
        f"- dlbridge commit: {git_rev()}; extension {native_build(dlbridge)}",
        f"- CPU: {cpu_model()} ({os.cpu_count()} logical CPUs)",
        f"- load average (1/5/15 min): {loadavg()} at start",
        "",
        "Ratio = peer median / dlbridge median: above 1.0 dlbridge is faster.",
        "",
    ]
    body: list[str] = []
    for group in groups(nbytes, cp is not None):
        body += run_group(group, ns, mode["samples"], mode["warmup"], limits)
        print(f"bench_gpu: {group['title']} done", file=sys.stderr)
    text = "\n".join(header + body)
    if args.no_write:
        print(text)
    else:
        print(f"wrote {write_results(text, args.out, 'gpu', args.quick)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
