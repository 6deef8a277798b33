"""``python -m dlbridge check``: which of the installed array libraries exchange what correctly.

For every producer x consumer pair of the installed libraries and every case of the checker
(:mod:`dlbridge_check.cases`), the checker runs the exchange directly
(``consumer.from_dlpack(x)``) and through dlbridge
(``consumer.from_dlpack(dlbridge.from_dlpack(x))``) in isolated worker processes, checks
values at every index, dtype, shape, aliasing, read-only status and exception types, and reports
a terminal summary, ``--json`` and ``--html``. The exit status is 1 when dlbridge itself fails a
case, 3 when it fails none but a library named by ``--fail-on`` has findings against it, 2 for a
usage error, 0 otherwise (whatever the other peer libraries do).

Cases name the entries of dlbridge's catalog of real-world cases (C1 and up,
:mod:`dlbridge_check.catalog`, printed by ``--catalog``) that they exercise; the reports link to
them.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import sysconfig
import time
from typing import Any

from . import report
from .adapters.base import Adapter, Observed, Recipe, Unsupported, reference
from .cases import CASES, select
from .external import ENTRY_POINT_GROUP
from .libraries import BUILTIN_NAMES, discover, use_names

__all__ = [
    "ENTRY_POINT_GROUP",
    "Adapter",
    "Observed",
    "Recipe",
    "Unsupported",
    "main",
    "reference",
    "run_check",
]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m dlbridge check",
        description="Exchange arrays between every pair of installed array libraries, directly and "
        "through dlbridge, and report what works. Exit status 1 when dlbridge itself fails a "
        "case, 3 when it fails none but --fail-on names a library with findings against it, "
        "2 for a usage error.",
    )
    p.add_argument(
        "--libraries",
        help="comma-separated peer libraries to check (default: every installed one, and the "
        f"adapters installed packages register in the entry point group {ENTRY_POINT_GROUP}); "
        "besides dlbridge's own names, a name may be such an entry point, module:object naming "
        "an adapter (a dlbridge_check.Adapter subclass), or any module whose arrays have "
        "__array_namespace__; the built-in reference producer/consumer (dlpack-ref) and "
        "python (memoryview) are always included",
    )
    p.add_argument(
        "--cases",
        help="comma-separated case ids, globs (layout/*), features (dtype) or catalog cases (C1); "
        "--catalog prints the catalog",
    )
    p.add_argument(
        "--fail-on",
        metavar="LIB[,LIB...]",
        help="exit with status 3 when a result is a finding against one of these libraries (as "
        "producer or consumer), for a library's own CI; findings against the others never change "
        "the exit status",
    )
    p.add_argument("--json", metavar="FILE", help="write the full results as JSON")
    p.add_argument("--html", metavar="FILE", help="write a self-contained HTML report")
    p.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 2,
        help="worker processes in parallel (default: CPU count)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="seconds one case may take before it counts as a hang (default 30)",
    )
    p.add_argument("--isolate", choices=["producer", "pair", "case"], default="producer",
                   help="one worker process per producer (default, fastest), per pair, or per case")
    p.add_argument("--top", type=int, default=12, help="how many findings to print (default 12)")
    p.add_argument("--list-cases", action="store_true", help="print the checker's cases and exit")
    p.add_argument(
        "--catalog",
        action="store_true",
        help="print dlbridge's catalog of real-world cases (C1 ...) as Markdown and exit",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    return p


def run_check(
    libraries: list[str] | None = None,
    cases: list[str] | None = None,
    *,
    jobs: int = 2,
    timeout: float = 30.0,
    isolate: str = "producer",
    progress=None,
    fail_on: list[str] | None = None,
    involving: str | None = None,
) -> tuple[dict, list[str], list[str]]:
    """Run the checker; returns (JSON document, producers, consumers). ``libraries`` and
    ``fail_on`` take the names of the command line (``--libraries``), adapters from outside
    dlbridge included: LookupError or TypeError for one that names no adapter. ``involving``
    (a library's name as the results give it): only the pairs with this library as producer or
    consumer (one library's conformance run)."""
    import dlbridge

    from .runner import run_units

    t0 = time.monotonic()
    libraries, fail_on = use_names(libraries), use_names(fail_on or [])
    found = discover(libraries)
    installed = [d for d in found if d.installed]
    producers = [d.name for d in installed if d.producer]
    consumers = [d.name for d in installed if d.consumer]
    chosen = select(cases)
    units = []
    for p in producers:
        for c in consumers:
            if involving is not None and involving not in (p, c):
                continue
            for case in chosen:
                if case.producers is not None and p not in case.producers:
                    continue
                if case.consumers is not None and c not in case.consumers:
                    continue
                for route in ("direct", "dlbridge"):
                    units.append((p, c, case.id, route))
    timings: dict[str, float] = {}
    slow = frozenset(d.name for d in installed if d.slow_import)
    raw = run_units(
        units,
        jobs=jobs,
        timeout=timeout,
        group_by=isolate,
        progress=progress,
        timings=timings,
        slow_consumers=slow,
    )
    by_id = {c.id: c for c in CASES}
    results = []
    for r in raw:
        case = by_id[r["case"]]
        results.append(
            {
                "case": r["case"],
                "refs": list(case.refs),
                "feature": case.feature,
                "producer": r["producer"],
                "consumer": r["consumer"],
                "route": r["route"],
                "status": r["status"],
                "detail": r.get("detail", ""),
                "fault": r.get("fault"),
                "check": r.get("check"),
                **({"stage": r["stage"]} if r.get("stage") else {}),
            }
        )
    order = {n: i for i, n in enumerate(d.name for d in found)}
    case_order = {c.id: i for i, c in enumerate(CASES)}
    results.sort(
        key=lambda r: (
            order.get(r["producer"], 99),
            order.get(r["consumer"], 99),
            case_order[r["case"]],
            r["route"],
        )
    )
    duration = time.monotonic() - t0
    meta: dict[str, Any] = {
        "dlbridge_version": dlbridge.__version__,
        "python": platform.python_version(),
        "interpreter": interpreter(),
        "platform": f"{platform.system()} {platform.machine()}",
        "libraries": {d.name: d.version for d in installed},
        "libraries_detail": [d.__dict__ for d in found],
        "not_installed": [
            d.name + (f" ({d.version} {d.reason})" if d.reason else "")
            for d in found
            if not d.installed
        ],
        "cases": len(chosen),
        "options": {
            "libraries": libraries,
            "cases": cases,
            "jobs": jobs,
            "timeout": timeout,
            "isolate": isolate,
            "fail_on": fail_on,
        },
        "batch_seconds": timings,
    }
    summary = report.summarize(
        results, meta["libraries"], duration, producers, consumers, {c.id for c in chosen},
        fail_on,
    )
    return report.document(meta, results, summary), producers, consumers


def interpreter() -> str:
    """The interpreter every library of this run was checked under: implementation, version,
    and for a free-threaded build whether the GIL is off."""
    name = f"{platform.python_implementation()} {platform.python_version()}"
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        gil_on = getattr(sys, "_is_gil_enabled", lambda: True)()
        return f"{name} free-threaded (GIL {'on' if gil_on else 'off'})"
    return name


def _names(arg: str | None) -> list[str] | None:
    """A comma-separated option as a list (None when not given)."""
    return [x.strip() for x in arg.split(",") if x.strip()] if arg else None


def _usage_error(libs: list[str] | None, fail_on: list[str] | None) -> str | None:
    """What is wrong with --libraries and --fail-on, if anything (also says on stderr which of
    the libraries asked for are not installed)."""
    try:
        libs, fail_on = use_names(libs), use_names(fail_on or [])
    except (LookupError, TypeError, ImportError, AttributeError) as e:
        known = ", ".join(sorted(BUILTIN_NAMES))
        return f"{e} (dlbridge's libraries: {known})"
    found = {d.name: d for d in discover(libs)}
    if libs:
        absent = [
            d.name + (f" ({d.reason})" if d.reason else "")
            for d in found.values()
            if not d.installed
        ]
        if absent:
            print(f"not installed (skipped): {', '.join(absent)}", file=sys.stderr)
    unchecked = [x for x in fail_on or [] if x not in found or not found[x].installed]
    if unchecked:
        return (
            f"--fail-on names libraries this run does not check: {', '.join(unchecked)} "
            "(not installed here, or not among --libraries)"
        )
    return None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.catalog:
        from .catalog import markdown

        sys.stdout.write(markdown())
        return 0
    if args.list_cases:
        for c in select(args.cases.split(",") if args.cases else None):
            only = f"  (only {', '.join(c.producers)})" if c.producers else ""
            print(f"{c.id:<34} {' '.join(c.refs):<14} {c.title}{only}")
        return 0
    if sys.platform == "win32":
        # the runner puts each worker in a session of its own and kills a hung one's group
        print("python -m dlbridge check runs its cases on Linux and macOS, not on Windows: its "
              "workers are isolated in POSIX process groups (--list-cases and --catalog work)",
              file=sys.stderr)
        return report.EXIT_USAGE
    libs, fail_on = _names(args.libraries), _names(args.fail_on)
    wrong = _usage_error(libs, fail_on)
    if wrong:
        print(wrong, file=sys.stderr)
        return report.EXIT_USAGE
    cases = [x.strip() for x in args.cases.split(",")] if args.cases else None
    if cases and not select(cases):
        print(f"no case matches {args.cases!r}; see --list-cases", file=sys.stderr)
        return report.EXIT_USAGE
    show = not args.quiet and sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if show and (done % 50 == 0 or done == total):
            sys.stderr.write(f"\r  {done}/{total} results")
            sys.stderr.flush()

    doc, producers, consumers = run_check(
        libs, cases, jobs=args.jobs, timeout=args.timeout, isolate=args.isolate,
        progress=progress, fail_on=fail_on,
    )
    if show:
        sys.stderr.write("\r" + " " * 40 + "\r")
    print(report.terminal(doc, doc["results"], doc["summary"], producers, consumers, top=args.top))
    if args.json:
        report.write_json(args.json, doc)
        print(f"\nJSON written to {args.json}")
    if args.html:
        with open(args.html, "w", encoding="utf-8") as f:
            f.write(report.html_page(doc, doc["results"], doc["summary"], producers, consumers))
        print(f"HTML written to {args.html}")
    return int(doc["summary"]["exit_status"])
