#!/usr/bin/env python3
"""Host copy speed: contiguous and transposed, against NumPy and PyTorch.

    python benches/bench_copy.py            # full run, writes benches/results/copy.md
    python benches/bench_copy.py --quick    # smoke test, writes benches/results/copy-quick.md

The groups at 64 MiB float32 are followed by sweeps: copies into an existing array from
1 MiB to 1 GiB (where the threads start to pay), allocating copies from 64 MiB to 1 GiB, and
4096 x 4096 transposes by dtype against dlbridge's own contiguous copy of the same bytes
(``--quick`` runs the smaller sizes only).

Each group times dlbridge and its peers on the same input in the same process, one call per
sample, samples interleaved (the order rotates every sample), and reports min and median ms
per call and, for each peer, the speed ratio peer median / dlbridge median (above 1.0 means
dlbridge is faster). Like is compared with like: allocating copies
against allocating peers, copies into an existing array against `np.copyto` / `Tensor.copy_`.
A missing library skips its rows; a statement that raises is reported as ``error: <Type>``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import (
    command_line,
    cpu_model,
    error_name,
    fmt_ratio,
    format_versions,
    git_rev,
    import_into,
    loadavg,
    make_once,
    sample_interleaved,
    try_import,
    utc_now,
    write_results,
)

SIDE = 4096  # 4096 x 4096 float32 = 64 MiB

FULL = {"samples": 31, "warmup": 3}
QUICK = {"samples": 5, "warmup": 1}


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


def run_group(group: Group, ns: dict[str, Any], missing: dict[str, str], samples: int,
              warmup: int) -> None:
    """Time every entry of ``group`` (one call per sample, samples interleaved) into its
    ``times``; an entry whose library is missing is skipped, one that raises gets ``error``."""
    live: list[tuple[Entry, Callable[[], float]]] = []
    for e in group.entries:
        absent = [missing[n] for n in e.needs if n in missing]
        if absent:
            e.skipped = absent[0]
            continue
        try:
            f = make_once(e.stmt, ns)
            for _ in range(warmup):
                f()
            live.append((e, f))
        except Exception as exc:  # noqa: BLE001 - reported in the table
            e.error = (
                f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
            )
    times, errors = sample_interleaved([f for _, f in live], samples)
    for (e, _), t, exc in zip(live, times, errors):
        e.times = t
        if exc is not None:
            e.error = error_name(exc)


def build_namespace(np: Any) -> tuple[dict[str, Any], dict[str, str]]:
    ns: dict[str, Any] = {"np": np}
    missing: dict[str, str] = {}
    rng = np.random.default_rng(0)
    a = rng.random((SIDE, SIDE), dtype=np.float32)
    ns["a"] = a
    ns["np_dst"] = np.empty_like(a)
    dlbridge = import_into(ns, missing, "dlbridge", "dlbridge", "dlbridge not importable")
    if dlbridge is not None:
        ns["x"] = dlbridge.from_dlpack(a)
        ns["dl_dst"] = dlbridge.from_dlpack(ns["np_dst"])
        if not hasattr(dlbridge, "copyto"):
            missing["copyto"] = "dlbridge.copyto is not exposed (yet)"
    torch = import_into(ns, missing, "torch", "torch", "torch not installed")
    if torch is not None:
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
            target=1.5,
            target_peer="np.copy(a)",
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
            "Cross-check for the stated target: dlbridge's allocating transpose against "
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
            target=1.0,
            target_peer="t_dst.copy_(t)",
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


# ---------------------------------------------------------------------------- sweeps

MIB = 1 << 20


@dataclass
class SweepRow:
    """One row of a sweep: its label and what it puts into the namespace."""

    label: str
    setup: Callable[[dict[str, Any], dict[str, str]], None]
    quick: bool = True  # part of --quick runs


@dataclass
class Sweep:
    """The same statements timed on several inputs (one group per row), one table."""

    title: str
    rows: list[SweepRow]
    entries: Callable[[], list[Entry]]  # fresh entries for each row
    targets: dict[str, float]  # peer label -> dlbridge speed / peer speed to reach
    note: str = ""
    results: list[tuple[str, Group]] = field(default_factory=list)


def samples_for(nbytes: int, samples: int) -> int:
    """Fewer samples for the biggest inputs (a 1 GiB copy takes a tenth of a second)."""
    return samples if nbytes <= 64 * MIB else max(5, samples // 3)


def float32_setup(np: Any, nbytes: int) -> Callable[[dict[str, Any], dict[str, str]], None]:
    """Put a float32 array of ``nbytes`` (``a``, ``x``, ``t``) and destinations into ns."""

    def setup(ns: dict[str, Any], missing: dict[str, str]) -> None:
        a = np.random.default_rng(0).random(nbytes // 4, dtype=np.float32)
        ns["a"], ns["np_dst"] = a, np.empty_like(a)
        if "dlbridge" in ns:
            ns["x"] = ns["dlbridge"].from_dlpack(a)
            ns["dl_dst"] = ns["dlbridge"].from_dlpack(ns["np_dst"])
        if "torch" in ns:
            ns["t"] = ns["torch"].from_numpy(a.copy())
            ns["t_dst"] = ns["torch"].empty_like(ns["t"])

    return setup


def transpose_setup(np: Any, dtype: str) -> Callable[[dict[str, Any], dict[str, str]], None]:
    """A 4096 x 4096 torch tensor ``t`` of ``dtype`` and its dlbridge views ``x``, ``xT``."""

    def setup(ns: dict[str, Any], missing: dict[str, str]) -> None:
        torch, dlbridge = ns.get("torch"), ns.get("dlbridge")
        if torch is None or dlbridge is None:
            missing["transpose"] = "needs torch and dlbridge"
            return
        bits = torch.randint(0, 256, (SIDE, SIDE), dtype=torch.uint8)
        t = bits.to(getattr(torch, dtype))
        ns["t"], ns["x"], ns["xT"] = t, dlbridge.from_dlpack(t), dlbridge.from_dlpack(t.T)
        assert torch.equal(torch.from_dlpack(ns["xT"].copy()), t.T)

    return setup


def sweeps(np: Any) -> list[Sweep]:
    d, n, t = ("dlbridge",), (), ("torch",)
    into = [1, 2, 4, 8, 16, 32, 64, 256, 1024]
    alloc = [16, 32, 64, 256, 1024]
    return [
        Sweep(
            "Copy into an existing float32 array, by size",
            [SweepRow(f"{m} MiB", float32_setup(np, m * MIB), quick=m in (1, 16, 64))
             for m in into],
            lambda: [
                Entry("dlbridge.copyto(dl_dst, x)", "dlbridge.copyto(dl_dst, x)",
                      ("dlbridge", "copyto"), ours=True),
                Entry("np.copyto(np_dst, a)", "np.copyto(np_dst, a)", n),
                Entry("t_dst.copy_(t)", "t_dst.copy_(t)", t),
            ],
            {"np.copyto(np_dst, a)": 1.8, "t_dst.copy_(t)": 1.0},
        ),
        Sweep(
            "Allocating copy of a contiguous float32 array, by size",
            [SweepRow(f"{m} MiB", float32_setup(np, m * MIB), quick=m == 64) for m in alloc],
            lambda: [
                Entry("x.copy()", "x.copy()", d, ours=True),
                Entry("np.copy(a)", "np.copy(a)", n),
                Entry("dlbridge.to_numpy(x, copy=True)", "dlbridge.to_numpy(x, copy=True)", d),
                Entry("dlbridge.convert(a, np, copy=True)",
                      "dlbridge.convert(a, np, copy=True)", d),
                Entry("t.clone()", "t.clone()", t),
                Entry("np.empty_like(a).fill(0)", "np.empty_like(a).fill(0)", n),
            ],
            {"np.copy(a)": 1.5},
            note="`to_numpy(copy=True)` and `convert(copy=True)` are dlbridge's too: their "
            "ratio shows what the Python layer adds to `x.copy()`. `np.empty_like(a).fill(0)` "
            "reads nothing: it allocates and writes the same bytes once, so it is the floor of "
            "any allocating copy (the page faults that give the process fresh memory, and one "
            "pass of stores).",
        ),
        Sweep(
            "C-order copy of the transpose of a 4096 x 4096 array, by dtype",
            [SweepRow(dt, transpose_setup(np, dt), quick=dt == "float32")
             for dt in ("float32", "float64", "uint8", "bfloat16")],
            lambda: [
                Entry("xT.copy()", "xT.copy()", ("dlbridge", "transpose"), ours=True),
                Entry("x.copy()", "x.copy()", ("dlbridge", "transpose")),
                Entry("t.T.contiguous()", "t.T.contiguous()", ("torch", "transpose")),
            ],
            {"x.copy()": 0.5, "t.T.contiguous()": 2.0},
            note="x = dlbridge.from_dlpack(t), xT = dlbridge.from_dlpack(t.T): the ratio "
            "against `x.copy()` is the transpose's speed as a fraction of dlbridge's contiguous "
            "copy of the same bytes.",
        ),
    ]


def run_sweep(sw: Sweep, base: dict[str, Any], missing: dict[str, str], quick: bool,
              samples: int, warmup: int) -> None:
    """Time every row of ``sw`` (inputs made fresh for each row and dropped after it)."""
    for row in sw.rows:
        if quick and not row.quick:
            continue
        ns, row_missing = dict(base), dict(missing)
        row.setup(ns, row_missing)
        nbytes = ns["a"].nbytes if "a" in ns else SIDE * SIDE * 4
        g = Group(row.label, sw.entries())
        run_group(g, ns, row_missing, samples_for(nbytes, samples), warmup)
        sw.results.append((row.label, g))
        ns.clear()


def render_sweep(sw: Sweep) -> str:
    labels = [e.label for e in sw.entries()]
    ours = next(e.label for e in sw.entries() if e.ours)
    peers = [lab for lab in labels if lab != ours]
    head = f"| | `{ours}` ms | " + " | ".join(f"`{p}` ms | ratio" for p in peers) + " |"
    lines = [f"### {sw.title}", ""]
    if sw.note:
        lines += [sw.note, ""]
    lines += [
        "Median ms per call; ratio = peer median / dlbridge "
        "median (above 1.0 dlbridge is faster).",
        "",
        head,
        "|---|---:|" + "---:|---:|" * len(peers),
    ]
    verdicts: dict[str, tuple[list[str], list[str]]] = {p: ([], []) for p in sw.targets}
    for label, g in sw.results:
        by = {e.label: e for e in g.entries}
        mine = by[ours]
        cells = [f"| {label} | {cell(mine)} |"]
        for p in peers:
            e = by[p]
            r = e.med / mine.med if e.med is not None and mine.med is not None else None
            cells.append(f" {cell(e)} | {fmt_ratio(r)} |")
            if p in sw.targets and r is not None:
                verdicts[p][0 if r >= sw.targets[p] else 1].append(label)
        lines.append("".join(cells))
    lines.append("")
    for p, target in sw.targets.items():
        met, missed = verdicts[p]
        lines.append(f"- target dlbridge >= {target:g}x the speed of `{p}`: met at "
                     f"{', '.join(met) or 'none'}; not met at {', '.join(missed) or 'none'}.")
    return "\n".join(lines)


def cell(e: Entry) -> str:
    if e.skipped:
        return f"skipped: {e.skipped}"
    if e.error:
        return e.error
    return _ms(e.med)


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
            ratio = fmt_ratio(e.med / ours.med)
        lines.append(f"| `{e.label}` | {_ms(e.best)} / {_ms(e.med)} | {ratio} |")
    ref = _reference(g)
    if g.target is not None:
        who = f"`{ref.label}`" if ref else "the fastest peer"
        if ours.med is None or ref is None:
            verdict = "not measured"
        else:
            r = ref.med / ours.med
            verdict = f"{fmt_ratio(r)} — {'met' if r >= g.target else '**not met**'}"
        lines += ["", f"Target: dlbridge >= {g.target:g}x the speed of {who}: {verdict}."]
    return "\n".join(lines)


def _thp() -> str:
    try:
        return Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().strip()
    except OSError:
        return "unknown"


def header(mods: dict[str, Any], params: dict[str, int], command: str, quick: bool,
           load: str) -> str:
    now = utc_now()
    torch = mods.get("torch")
    threads = f"torch threads {torch.get_num_threads()}" if torch is not None else "no torch"
    return "\n".join([
        "# Host copy speed: contiguous and transposed, 1 MiB to 1 GiB",
        "",
        "Generated by `benches/bench_copy.py`. Quote the ratios (every statement of a group "
        "measured in this one run, samples interleaved); absolute "
        "times are for this machine only.",
        "",
        f"- date: {now}",
        f"- command: `{command}`",
        f"- mode: {'QUICK (smoke test, few samples; do not quote)' if quick else 'full'}; "
        f"{params['samples']} samples of one call per statement, {params['warmup']} warm-up "
        "calls, gc disabled while timing",
        f"- Python: {platform.python_implementation()} {platform.python_version()}",
        f"- versions: {format_versions(mods)}",
        f"- dlbridge commit: {git_rev()}",
        f"- CPU: {cpu_model()} ({os.cpu_count()} logical CPUs; {threads}; dlbridge uses a "
        "rayon pool of one thread per CPU; NumPy copies on one thread)",
        f"- transparent huge pages: {_thp()}",
        f"- load average (1/5/15 min): {load} at start, {loadavg()} at the end (other processes "
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

    load = loadavg()
    np = try_import("numpy")
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
    base = {k: ns[k] for k in ("np", "dlbridge", "torch") if k in ns}
    ns.clear()
    for sw in sweeps(np):
        run_sweep(sw, base, missing, args.quick, params["samples"], params["warmup"])
        out.append(render_sweep(sw))
    command = command_line("benches/bench_copy.py", argv)
    text = header(mods, params, command, args.quick, load) + "\n\n" + "\n\n".join(out) + "\n"
    print(text)
    if not args.no_write:
        path = write_results(text, args.out, "copy", args.quick)
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
