#!/usr/bin/env python3
"""Host copy speed: 64 MiB float32, contiguous and transposed, against NumPy and PyTorch.

    python benches/bench_copy.py            # full run, writes benches/results/copy.md
    python benches/bench_copy.py --quick    # smoke test, writes benches/results/copy-quick.md

Each group times dlbridge and its peers on the same input in the same process, one call per
sample, samples interleaved (the order rotates every sample), and reports min and median ms
per call and, for each peer, the speed ratio peer median / dlbridge median (above 1.0 means
dlbridge is faster). Like is compared with like (DECISIONS.md, Benchmarks): allocating copies
against allocating peers, copies into an existing array against `np.copyto` / `Tensor.copy_`.
A missing library skips its rows; a statement that raises is reported as ``error: <Type>``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import importlib
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SIDE = 4096  # 4096 x 4096 float32 = 64 MiB

FULL = {"samples": 31, "warmup": 3}
QUICK = {"samples": 5, "warmup": 1}


def _try_import(name: str) -> Any | None:
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a broken install is as good as a missing one here
        return None


def _version(mod: Any | None) -> str:
    return "not installed" if mod is None else str(getattr(mod, "__version__", "?"))


@dataclass
class Entry:
    """One contender of a group: a label (the statement shown) and the statement timed."""

    label: str
    stmt: str
    needs: tuple[str, ...]
    ours: bool = False
    times: list[float] = field(default_factory=list)
    error: str | None = None
    skipped: str | None = None

    @property
    def med(self) -> float | None:
        return statistics.median(self.times) if self.times and not self.error else None

    @property
    def best(self) -> float | None:
        return min(self.times) if self.times and not self.error else None


@dataclass
class Group:
    title: str
    entries: list[Entry]
    target: float | None = None  # dlbridge speed / reference peer speed must reach this
    target_peer: str | None = None  # label of the reference peer; None = the fastest peer
    note: str = ""

    @property
    def ours(self) -> Entry:
        return next(e for e in self.entries if e.ours)


def _compile(stmt: str, ns: dict[str, Any]) -> Callable[[], float]:
    src = (
        "def _once(_clock=_clock):\n"
        "    _t0 = _clock()\n"
        f"    {stmt}\n"
        "    return _clock() - _t0\n"
    )
    g = dict(ns)
    g["_clock"] = time.perf_counter
    exec(compile(src, f"<bench {stmt}>", "exec"), g)  # noqa: S102 - our own fixed strings
    return g["_once"]


def run_group(group: Group, ns: dict[str, Any], missing: dict[str, str], samples: int,
              warmup: int) -> None:
    live: list[tuple[Entry, Callable[[], float]]] = []
    for e in group.entries:
        absent = [missing[n] for n in e.needs if n in missing]
        if absent:
            e.skipped = absent[0]
            continue
        try:
            f = _compile(e.stmt, ns)
            for _ in range(warmup):
                f()
            live.append((e, f))
        except Exception as exc:  # noqa: BLE001 - reported in the table
            e.error = f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        for s in range(samples):
            k = s % len(live) if live else 0
            for e, f in live[k:] + live[:k]:  # rotate who goes first
                if e.error:
                    continue
                try:
                    e.times.append(f())
                except Exception as exc:  # noqa: BLE001
                    e.error = f"error: {type(exc).__name__}"
    finally:
        if enabled:
            gc.enable()


def build_namespace(np: Any) -> tuple[dict[str, Any], dict[str, str]]:
    ns: dict[str, Any] = {"np": np}
    missing: dict[str, str] = {}
    rng = np.random.default_rng(0)
    a = rng.random((SIDE, SIDE), dtype=np.float32)
    ns["a"] = a
    ns["np_dst"] = np.empty_like(a)
    dlbridge = _try_import("dlbridge")
    if dlbridge is None:
        missing["dlbridge"] = "dlbridge not importable"
    else:
        ns["dlbridge"] = dlbridge
        ns["x"] = dlbridge.from_dlpack(a)
        ns["dl_dst"] = dlbridge.from_dlpack(ns["np_dst"])
        if not hasattr(dlbridge, "copyto"):
            missing["copyto"] = "dlbridge.copyto is not exposed (yet)"
    torch = _try_import("torch")
    if torch is None:
        missing["torch"] = "torch not installed"
    else:
        ns["torch"] = torch
        ns["t"] = torch.from_numpy(a.copy())
        ns["t_dst"] = torch.empty_like(ns["t"])
    return ns, missing


def check_results(ns: dict[str, Any]) -> None:
    """Before timing: dlbridge's copies equal NumPy's."""
    np, dlbridge, a = ns["np"], ns.get("dlbridge"), ns["a"]
    if dlbridge is None:
        return
    assert np.array_equal(np.from_dlpack(ns["x"].copy()), a)
    assert np.array_equal(np.from_dlpack(dlbridge.from_dlpack(a.T).copy()), a.T)
    if hasattr(dlbridge, "copyto"):
        dlbridge.copyto(ns["dl_dst"], dlbridge.from_dlpack(a.T))
        assert np.array_equal(ns["np_dst"], a.T)


def groups() -> list[Group]:
    d, n, t = ("dlbridge",), (), ("torch",)
    return [
        Group(
            "Allocating copy of a contiguous 64 MiB float32",
            [
                Entry("x.copy()", "x.copy()", d, ours=True),
                Entry("np.copy(a)", "np.copy(a)", n),
                Entry("t.clone()", "t.clone()", t),
            ],
            target=0.9,
            note="x = dlbridge.from_dlpack(a); t = torch.from_numpy(a.copy()).",
        ),
        Group(
            "Allocating C-order copy of the transpose of a 4096 x 4096 float32",
            [
                Entry("dlbridge.from_dlpack(a.T).copy()", "dlbridge.from_dlpack(a.T).copy()",
                      d, ours=True),
                Entry("np.ascontiguousarray(a.T)", "np.ascontiguousarray(a.T)", n),
                Entry("t.T.contiguous()", "t.T.contiguous()", t),
            ],
            target=1.0,
            target_peer="t.T.contiguous()",
        ),
        Group(
            "Cross-check for issue 3's stated target: dlbridge's allocating transpose against "
            "torch's copy of the transpose into an existing tensor",
            [
                Entry("dlbridge.from_dlpack(a.T).copy()", "dlbridge.from_dlpack(a.T).copy()",
                      d, ours=True),
                Entry("t_dst.copy_(t.T)", "t_dst.copy_(t.T)", t),
            ],
            target=1.0,
            target_peer="t_dst.copy_(t.T)",
            note="Not like with like: dlbridge allocates and first-touches 64 MiB, torch writes "
            "into memory it already has. Reaching the target here implies reaching it like with "
            "like (next groups, once `dlbridge.copyto` is exposed).",
        ),
        Group(
            "Copy into an existing 64 MiB float32 (contiguous source)",
            [
                Entry("dlbridge.copyto(dl_dst, x)", "dlbridge.copyto(dl_dst, x)",
                      ("dlbridge", "copyto"), ours=True),
                Entry("np.copyto(np_dst, a)", "np.copyto(np_dst, a)", n),
                Entry("t_dst.copy_(t)", "t_dst.copy_(t)", t),
            ],
            target=0.9,
        ),
        Group(
            "Copy of the transpose into an existing 4096 x 4096 float32",
            [
                Entry("dlbridge.copyto(dl_dst, dlbridge.from_dlpack(a.T))",
                      "dlbridge.copyto(dl_dst, dlbridge.from_dlpack(a.T))",
                      ("dlbridge", "copyto"), ours=True),
                Entry("np.copyto(np_dst, a.T)", "np.copyto(np_dst, a.T)", n),
                Entry("t_dst.copy_(t.T)", "t_dst.copy_(t.T)", t),
            ],
            target=1.0,
            target_peer="t_dst.copy_(t.T)",
        ),
    ]


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v * 1e3:.2f}"


def _reference(g: Group) -> Entry | None:
    peers = [e for e in g.entries if not e.ours and e.med is not None]
    if g.target_peer is not None:
        return next((e for e in peers if e.label == g.target_peer), None)
    return min(peers, key=lambda e: e.med, default=None)


def render_group(g: Group) -> str:
    ours = g.ours
    lines = [f"### {g.title}", ""]
    if g.note:
        lines += [g.note, ""]
    lines += [
        "| statement | ms (min / median) | speed of dlbridge vs this (ratio of medians) |",
        "|---|---:|---:|",
    ]
    for e in g.entries:
        if e.skipped:
            lines.append(f"| `{e.label}` | skipped: {e.skipped} | — |")
            continue
        if e.error:
            lines.append(f"| `{e.label}` | {e.error} | — |")
            continue
        if e.ours:
            ratio = "(dlbridge)"
        elif ours.med is None:
            ratio = "—"
        else:
            ratio = f"{e.med / ours.med:.2f}x"
        lines.append(f"| `{e.label}` | {_ms(e.best)} / {_ms(e.med)} | {ratio} |")
    ref = _reference(g)
    if g.target is not None:
        who = f"`{ref.label}`" if ref else "the fastest peer"
        if ours.med is None or ref is None:
            verdict = "not measured"
        else:
            r = ref.med / ours.med
            verdict = f"{r:.2f}x — {'met' if r >= g.target else '**not met**'}"
        lines += ["", f"Target: dlbridge >= {g.target:g}x the speed of {who}: {verdict}."]
    return "\n".join(lines)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_rev() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(HERE.parent), "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return rev + (" (+ uncommitted changes)" if dirty else "")
    except Exception:  # noqa: BLE001
        return "unknown"


def _loadavg() -> str:
    try:
        return " / ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def _thp() -> str:
    try:
        return Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().strip()
    except OSError:
        return "unknown"


def header(mods: dict[str, Any], params: dict[str, int], command: str, quick: bool,
           load: str) -> str:
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    torch = mods.get("torch")
    threads = f"torch threads {torch.get_num_threads()}" if torch is not None else "no torch"
    return "\n".join([
        "# Host copy speed: 64 MiB float32, contiguous and transposed",
        "",
        "Generated by `benches/bench_copy.py`. Quote the ratios (every statement of a group "
        "measured in this one run, samples interleaved); absolute times are for this machine "
        "only.",
        "",
        f"- date: {now}",
        f"- command: `{command}`",
        f"- mode: {'QUICK (smoke test, few samples; do not quote)' if quick else 'full'}; "
        f"{params['samples']} samples of one call per statement, {params['warmup']} warm-up "
        "calls, gc disabled while timing",
        f"- Python: {platform.python_implementation()} {platform.python_version()}",
        f"- versions: " + ", ".join(f"{k} {_version(m)}" for k, m in mods.items()),
        f"- dlbridge commit: {_git_rev()}",
        f"- CPU: {_cpu_model()} ({os.cpu_count()} logical CPUs; {threads}; dlbridge uses a "
        "rayon pool of one thread per CPU; NumPy copies on one thread)",
        f"- transparent huge pages: {_thp()}",
        f"- load average (1/5/15 min): {load} at start, {_loadavg()} at the end (other processes "
        "share these CPUs: interleaved samples keep the ratios comparable, absolute times "
        "drift with load; parallel kernels suffer most when a CPU is taken)",
        "",
        "Ratio = peer median / dlbridge median: above 1.0 dlbridge is faster. Results are "
        "dropped right after each call, so allocation, first-touch page faults and freeing "
        "are part of every allocating row, on every side.",
    ])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="few samples, for smoke tests (writes copy-quick.md, not copy.md)")
    ap.add_argument("--samples", type=int, help="samples per statement (default 31, quick 5)")
    ap.add_argument("--out", type=Path, help="where to write the Markdown")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args(argv)

    load = _loadavg()
    np = _try_import("numpy")
    if np is None:
        print("numpy is required for this benchmark", file=sys.stderr)
        return 1
    params = dict(QUICK if args.quick else FULL)
    if args.samples:
        params["samples"] = args.samples
    ns, missing = build_namespace(np)
    check_results(ns)
    mods = {"dlbridge": ns.get("dlbridge"), "numpy": np, "torch": ns.get("torch")}
    out = []
    for g in groups():
        run_group(g, ns, missing, params["samples"], params["warmup"])
        out.append(render_group(g))
    command = "python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])])
    text = header(mods, params, command, args.quick, load) + "\n\n" + "\n\n".join(out) + "\n"
    print(text)
    if not args.no_write:
        path = args.out or RESULTS / ("copy-quick.md" if args.quick else "copy.md")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
