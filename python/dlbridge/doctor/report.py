"""The doctor's findings as one document (the ``--json`` report, versioned and described by
``report.schema.json`` beside this module) and as text for the terminal."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from collections.abc import Callable
from importlib.resources import files
from typing import Any

from .environment import Cuda, Distribution, Interpreter, Wheel, checker_problem
from .problems import Problem

#: The version of the JSON report's layout: raised when a field is removed, renamed or changes
#: its meaning.
SCHEMA_VERSION = 1


def document(
    interp: Interpreter,
    dlbridge_wheel: Wheel,
    wheel_problem: str | None,
    checker: str | None,
    extension: str,
    libraries: list[Distribution],
    cuda: Cuda,
    oneapi: list[str],
    problems: list[Problem],
    version_of: Callable[[str], str | None],
) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "dlbridge_version": dlbridge_wheel.version,
        "interpreter": {**dataclasses.asdict(interp), "tag": interp.tag},
        "wheel": {"tags": dlbridge_wheel.tags, "problem": wheel_problem},
        "checker": {
            "version": checker,
            "problem": checker_problem(checker, dlbridge_wheel.version),
        },
        "extension": extension,
        "libraries": [dataclasses.asdict(d) for d in libraries],
        "cuda": dataclasses.asdict(cuda),
        "oneapi": oneapi,
        "problems": [
            {
                "id": p.id,
                "problem": p.problem,
                "source": p.source,
                "fix": p.fix,
                "installed": {d: version_of(d) for d in p.distributions()},
            }
            for p in problems
        ],
        "probe": None,
        "seconds": 0.0,
    }


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the ``--json`` report (``report.schema.json`` in this package)."""
    return json.loads(files(__package__).joinpath("report.schema.json").read_text("utf-8"))


def text(doc: dict[str, Any]) -> str:
    """The report for the terminal."""
    interp = doc["interpreter"]
    gil = "on (a GIL build)"
    if interp["free_threaded"]:
        gil = "off" if not interp["gil_enabled"] else "on in this free-threaded build: an " \
            "extension turned it back on, or PYTHON_GIL=1 (--probe names the extensions)"
    lines = [
        "python -m dlbridge doctor",
        f"  interpreter  {interp['implementation']} {interp['version']} ({interp['tag']}) on "
        f"{interp['platform']}",
        _fill(gil, "  GIL          ", " " * 15),
        f"  dlbridge     {doc['dlbridge_version'] or 'not installed as a distribution'}"
        + (f", wheel {', '.join(doc['wheel']['tags'])}" if doc["wheel"]["tags"] else ""),
        f"  extension    {doc['extension']}",
    ]
    if doc["wheel"]["problem"]:
        lines.append(f"               {doc['wheel']['problem']}")
    checker = doc["checker"]
    pin = f"=={doc['dlbridge_version']}" if doc["dlbridge_version"] else ""
    lines.append(
        f"  checker      dlbridge-check {checker['version']}"
        if checker["version"]
        else "  checker      not installed (python -m dlbridge check needs it: "
        f"pip install dlbridge-check{pin})"
    )
    if checker["problem"]:
        lines.append(_fill(checker["problem"], " " * 15))
    installed = [d for d in doc["libraries"] if d["version"]]
    absent = [d["name"] for d in doc["libraries"] if not d["version"]]
    lines.append(_wrap("  libraries    ", [_dist(d) for d in installed] or ["none"]))
    if absent:
        lines.append(_wrap("  not found    ", absent))
    lines.append(_fill(_cuda(doc["cuda"]), "  CUDA         ", " " * 15))
    lines += [f"{' ' * 15}{d}" for d in doc["cuda"]["devices"]]
    lines.append(f"  oneAPI       {', '.join(doc['oneapi']) or 'no Intel GPU'}")
    probe = doc["probe"]
    if probe is not None:
        lines += ["", *probe_text(probe)]
    lines.append("")
    if not doc["problems"]:
        lines.append("No known problem applies.")
    else:
        lines.append(f"{len(doc['problems'])} known problem(s) apply:")
        for p in doc["problems"]:
            installed_text = ", ".join(f"{d} {v}" for d, v in p["installed"].items())
            lines.append(f"  {p['id']}" + (f" ({installed_text})" if installed_text else ""))
            lines.append(_fill(p["problem"], "    "))
            lines.append(_fill(f"source: {p['source']}", "    ", "            "))
            lines.append(_fill(f"fix:    {p['fix']}", "    ", "            "))
    lines.append(f"({doc['seconds']:.2f} s)")
    return "\n".join(lines)


def _fill(text_: str, first: str, rest: str = "", width: int = 100) -> str:
    """``text_`` wrapped at ``width``, its first line after ``first``, the others after
    ``rest`` (default: as much space)."""
    return textwrap.fill(text_, width, initial_indent=first,
                         subsequent_indent=rest or " " * len(first), break_on_hyphens=False)


def _wrap(head: str, items: list[str], width: int = 100) -> str:
    """``items`` comma-separated after ``head``, continued under it past ``width``."""
    lines, line = [], head
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else "")
        if len(line) + len(piece) + 1 > width and line.strip():
            lines.append(line.rstrip())
            line = " " * len(head)
        line += piece + " "
    lines.append(line.rstrip())
    return "\n".join(lines)


def _dist(d: dict[str, Any]) -> str:
    extra = "" if d["why"] == "library" else f" [{d['why']}]"
    return f"{d['name']} {d['version']}{extra}"


def _cuda(c: dict[str, Any]) -> str:
    loaded = (
        f"driver loaded ({c['loaded']})"
        if c["loaded"]
        else f"driver not loaded ({c['library']} loads on dlbridge's first CUDA operation)"
    )
    if not c["kernel_driver"]:
        return f"{loaded}; no NVIDIA kernel driver"
    return f"{loaded}; kernel driver {c['kernel_driver']}, {len(c['devices'])} GPU(s)"


def probe_text(probe: dict[str, Any]) -> list[str]:
    lines = ["--probe"]
    imported = probe["imported"]
    ok = [name for name, why in imported.items() if not why]
    lines.append(_wrap("  imported     ", ok or ["nothing"]))
    for name, why in imported.items():
        if why:
            lines.append(f"  not imported {name}: {why}")
    for name, modules in probe["gil_enabled_by"].items():
        lines.append(f"  GIL on       importing {name} turned it on: {', '.join(modules)}")
    if probe["free_threaded"] and not probe["gil_enabled_by"]:
        lines.append("  GIL          no import turned it on")
    for name, driver in probe["cuda_loaded_by"].items():
        lines.append(f"  CUDA         importing {name} loads the driver ({driver})")
    check = probe["check"]
    if check["ran"]:
        lines.append(_fill(
            f"{check['results']} exchanges of each library with the reference peer, both ways: "
            f"{_counts(check['counts'])}", "  check        ", " " * 15,
        ))
        for finding in check["findings"]:
            lines.append(_fill(finding, "    ", "      "))
    else:
        lines.append(f"  check        not run: {check['why']}")
    if check["left_out"]:
        slow = [f"{name} ({seconds:.1f} s)" for name, seconds in check["left_out"].items()]
        lines.append(_fill(
            "left out, slow to import: " + ", ".join(slow) + "; python -m dlbridge check "
            "--libraries " + ",".join(check["left_out"]) + " runs their cases",
            "  check        ", " " * 15,
        ))
    lines.append(f"  ({probe['seconds']:.1f} s)")
    return lines


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {status}" for status, n in counts.items() if n) or "none"


def write(path: str, doc: dict[str, Any]) -> None:
    """Write ``doc`` as JSON to ``path`` (``-``: standard output)."""
    data = json.dumps(doc, indent=1) + "\n"
    if path == "-":
        import sys

        sys.stdout.write(data)
        return
    with open(path, "w", encoding="utf-8") as f:
        f.write(data)
