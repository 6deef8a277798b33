"""``--probe``: import the installed libraries, name the extensions that turned the GIL back
on, and run a fast subset of the conformance checker's cases among them: each library with the
checker's reference producer and consumer, both ways.

The imports run first, in parallel, each timed in its own process (in processor time). The live
cases then run for the libraries that import within :data:`LIVE_IMPORT_SECONDS`: the checker
imports each library again in its workers, and the few libraries that take seconds to import
(TensorFlow, Paddle) would cost the probe more than all the others together. The report names
the libraries left out and how long each import took; ``python -m dlbridge check`` runs every
pair.

The checker is reached only through its public entry point (``dlbridge_check.run_check``), so
the doctor says so, and goes on, when the checker is not importable here.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .environment import Distribution

#: the checker's cases the probe runs: a plain exchange and the three behaviours the known
#: problems are about (copies that alias, read-only memory made writable, one-shot capsules)
CASES = ["dtype/float32", "copy/true", "readonly/contiguous", "capsule/consumed"]
#: the checker's reference producer and consumer: the probe exchanges each library with it
#: alone, both ways, so that each worker process imports one library (every pair of libraries
#: is what ``python -m dlbridge check`` is for)
REFERENCE = "dlpack-ref"
#: seconds one case may take in the probe before it counts as a hang
CASE_TIMEOUT = 15.0
#: how many of the checker's findings the probe prints
TOP = 5

_GIL_WARNING = re.compile(r"GIL\)? has been enabled to load module '([^']+)'")
#: seconds one library's import may take
IMPORT_TIMEOUT = 120.0
#: the live cases run for the libraries whose import took at most this many seconds of processor
#: time
LIVE_IMPORT_SECONDS = 2.5

#: What a child process runs to import one module (argv[1]): prints, as JSON, CPython's
#: warnings of the import (one names each extension that turned the GIL back on) and the CUDA
#: driver mapped into the process afterwards.
_IMPORT_ONE = """
import importlib, json, sys, time, warnings
start = time.process_time()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", RuntimeWarning)
    importlib.import_module(sys.argv[1])
seconds = time.process_time() - start
from dlbridge.doctor.environment import cuda
print(json.dumps({"warnings": [str(w.message) for w in caught], "cuda": cuda().loaded,
                  "seconds": seconds}))
"""


@dataclass
class Imported:
    """What importing one library did."""

    #: why the import failed ("" when it worked)
    failed: str = ""
    #: the extension modules that turned the GIL back on
    gil_enabled_by: list[str] = field(default_factory=list)
    #: the CUDA driver the import loaded ("" when none)
    cuda: str = ""
    #: the processor time the import itself took (a busy machine does not inflate it)
    seconds: float = 0.0


def import_one(module: str) -> Imported:
    """Import ``module`` in a process of its own (an import that crashes or hangs is a finding,
    not the end of the probe)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _IMPORT_ONE, module],
            capture_output=True, text=True, timeout=IMPORT_TIMEOUT, check=False,
        )
    except subprocess.TimeoutExpired:
        return Imported(failed=f"the import took more than {IMPORT_TIMEOUT:.0f} s")
    if done.returncode < 0:
        return Imported(failed=f"the import crashed the interpreter (signal {-done.returncode})")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["exit status " + str(done.returncode)])[-1]
        return Imported(failed=last)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    enabled_by = [m[1] for w in found["warnings"] if (m := _GIL_WARNING.search(w))]
    return Imported(gil_enabled_by=enabled_by, cuda=found["cuda"], seconds=found["seconds"])


def imports(modules: dict[str, str]) -> dict[str, Imported]:
    """Import each module (by library name), in parallel processes."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return dict(zip(modules, pool.map(import_one, modules.values())))


def check(libraries: list[str]) -> dict[str, Any]:
    """The checker's probe cases among ``libraries``: what ran and its findings."""
    try:
        from dlbridge_check import run_check
    except ImportError as e:
        from .. import __version__

        return _not_run(
            f"the conformance checker does not import here ({e}): "
            f"pip install dlbridge-check=={__version__}"
        )
    if sys.platform == "win32":
        return _not_run("the checker runs its cases on Linux and macOS")
    try:
        doc, producers, consumers = run_check(
            libraries, CASES, jobs=os.cpu_count() or 2, timeout=CASE_TIMEOUT, involving=REFERENCE
        )
    except (LookupError, TypeError) as e:
        return _not_run(str(e))
    counts: dict[str, int] = {}
    for by_status in doc["summary"]["by_route"].values():
        for status, n in by_status.items():
            counts[status] = counts.get(status, 0) + n
    findings = [
        f"{f['status']}: {f['example']}"[:200] for f in doc["summary"]["findings"][:TOP]
    ]
    return {
        "ran": True,
        "why": "",
        "libraries": sorted(set(producers) | set(consumers)),
        "cases": CASES,
        "results": doc["summary"]["results"],
        "counts": counts,
        "findings": findings,
        "left_out": {},
    }


def _module_of(dist: str, installs: Mapping[str, list[str]]) -> str:
    """The top-level module ``dist`` installs ("" when it installs none, or none is known), by
    ``installs`` (``importlib.metadata.packages_distributions()``)."""
    for module, dists in installs.items():
        if dist.lower() in (d.lower() for d in dists) and not module.startswith("_"):
            return module
    return ""


def _not_run(why: str) -> dict[str, Any]:
    return {
        "ran": False, "why": why, "libraries": [], "cases": CASES, "results": 0, "counts": {},
        "findings": [], "left_out": {},
    }


def probe(libraries: list[Distribution], free_threaded: bool) -> dict[str, Any]:
    """Import the installed ``libraries`` (those with a module), then run the checker's probe
    cases among them."""
    t0 = time.monotonic()
    # what other distributions install: read only when one needs it (it reads every
    # installed distribution's file list)
    installs = importlib.metadata.packages_distributions() if any(
        d.version and not d.module for d in libraries
    ) else {}
    modules = {
        d.name: d.module or _module_of(d.distribution, installs) for d in libraries if d.version
    }
    done = imports({name: module for name, module in modules.items() if module})
    # the checker's names are the libraries' (dlbridge's namespaces); its workers import them
    # again, so the live cases leave out the libraries that are slow to import
    names = [d.name for d in libraries if d.why == "library" and d.version]
    slow = {
        name: round(done[name].seconds, 1)
        for name in names
        if name in done and done[name].seconds > LIVE_IMPORT_SECONDS
    }
    live = [name for name in names if name not in slow]
    result = check(live) if live else _not_run("every library is slow to import")
    result["left_out"] = slow
    return {
        "free_threaded": free_threaded,
        "imported": {name: i.failed for name, i in done.items()},
        "gil_enabled_by": {name: i.gil_enabled_by for name, i in done.items() if i.gil_enabled_by},
        "cuda_loaded_by": {name: i.cuda for name, i in done.items() if i.cuda},
        "check": result,
        "seconds": round(time.monotonic() - t0, 2),
    }
