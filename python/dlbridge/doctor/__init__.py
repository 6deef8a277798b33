"""``python -m dlbridge doctor``: what is wrong with this environment, in seconds.

The plain run reads the interpreter, dlbridge's wheel, the installed distributions (package
metadata only: no array library is imported) and the devices the kernel describes, then
prints each known problem (``known_problems.json`` in this package) that applies, with its
fix. ``--probe`` also imports the installed libraries, names the extensions that turned the
GIL back on and runs a fast subset of the conformance checker's cases among them.

Exit status: 0; with ``--strict`` 1 when a known problem applies; 2 for a usage error.
"""

from __future__ import annotations

import argparse
import sys
import time

from . import environment as env
from . import problems as kb
from .report import document, text, write

#: The exit statuses: a known problem applies (``--strict``); a usage error.
EXIT_PROBLEM, EXIT_USAGE = 1, 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m dlbridge doctor",
        description="Report this environment (interpreter, GIL, dlbridge's wheel, the array "
        "libraries and their versions, CUDA and oneAPI devices) and every known problem of "
        "exchanging arrays that applies to it, with its fix. Exit status 0; with --strict 1 "
        "when a known problem applies; 2 for a usage error.",
    )
    p.add_argument(
        "--json",
        metavar="PATH",
        help="also write the report as JSON (schema: dlbridge/doctor/report.schema.json) to "
        "PATH, or to standard output for -",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help=f"exit with status {EXIT_PROBLEM} when a known problem applies (for a CI step)",
    )
    p.add_argument(
        "--probe",
        action="store_true",
        help="also import the installed libraries, name any extension that turned the GIL back "
        "on, and run a fast subset of the conformance checker's cases among them (seconds)",
    )
    return p


def libraries(known: list[kb.Problem]) -> list[env.Distribution]:
    """dlbridge's libraries, the distributions that register a checker adapter, and the
    installed distributions the ``known`` problems name (each once)."""
    from ..libraries import known_libraries

    found = [
        env.library(lib.name, lib.module, lib.distribution)
        for lib in known_libraries()
        if lib.name != "dlbridge"
    ]
    seen = {d.distribution.lower() for d in found} | {d.name for d in found}
    for d in env.registered():
        if d.name.lower() not in seen:
            found.append(d)
            seen.add(d.name.lower())
    for problem in known:
        for dist in problem.distributions():
            version = env.version_of(dist)
            if version is not None and dist.lower() not in seen:
                found.append(env.Distribution(dist, dist, version, "known problem"))
                seen.add(dist.lower())
    return found


def diagnose(probe: bool = False) -> dict:
    """The doctor's report (the ``--json`` document)."""
    t0 = time.monotonic()
    interp = env.interpreter()
    wheel = env.wheel()
    known = kb.load()
    libs = libraries(known)
    versions = {d.distribution: d.version for d in libs}
    facts = kb.Facts(
        version_of=lambda dist: versions[dist] if dist in versions else env.version_of(dist),
        free_threaded=interp.free_threaded,
        wheel_abis=frozenset(wheel.abis),
    )
    from .. import _native

    doc = document(
        interp,
        wheel,
        env.wheel_problem(wheel.tags, interp),
        env.version_of("dlbridge-check"),
        _native.__file__ or "",
        libs,
        env.cuda(),
        env.oneapi_devices(),
        kb.matching(facts, known),
        facts.version_of,
    )
    if probe:
        from .probe import probe as run_probe

        doc["probe"] = run_probe(libs, interp.free_threaded)
    doc["seconds"] = round(time.monotonic() - t0, 3)
    return doc


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # argparse's usage errors and --help
        return EXIT_USAGE if e.code else 0
    doc = diagnose(args.probe)
    if args.json != "-":
        print(text(doc))
    if args.json:
        try:
            write(args.json, doc)
        except OSError as e:
            print(f"cannot write the JSON report: {e}", file=sys.stderr)
            return EXIT_USAGE
    return EXIT_PROBLEM if args.strict and doc["problems"] else 0


__all__ = ["EXIT_PROBLEM", "EXIT_USAGE", "diagnose", "main"]
