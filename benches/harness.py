"""Shared helpers of the benchmark scripts in benches/ (bench_exchange, bench_copy, bench_arrow).

Not a benchmark itself. The scripts are run as ``python benches/bench_X.py`` and import this
module from their own directory. What is here:

- optional imports: :func:`try_import`, :func:`import_into`, :func:`version`,
  :func:`format_versions`;
- timing: :func:`make_loop` (N calls, ns), :func:`make_once` (one call, s),
  :func:`sample_interleaved` (samples of several statements, interleaved, gc off),
  :class:`Timing` and :func:`measure_pair` (one statement against its baseline);
- formatting: :func:`error_name`, :func:`fmt_ratio`;
- the environment for result headers: :func:`utc_now`, :func:`cpu_model`, :func:`loadavg`,
  :func:`git_rev`, :func:`native_build`, :func:`command_line`;
- :func:`write_results` (``results/<name>.md`` or ``results/<name>-quick.md``).
"""

from __future__ import annotations

import datetime as _dt
import gc
import hashlib
import importlib
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCHES = Path(__file__).resolve().parent
REPO = BENCHES.parent
RESULTS = BENCHES / "results"


# ---------------------------------------------------------------------------- libraries


def try_import(name: str) -> Any | None:
    """Import module ``name``; None if that fails for any reason (a broken install counts as a
    missing one)."""
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a broken install is as good as a missing one here
        return None


def import_into(ns: dict[str, Any], missing: dict[str, str], key: str, module: str,
                why: str) -> Any | None:
    """Import ``module`` into ``ns[key]``, or record ``missing[key] = why`` if it cannot be
    imported. Returns the module or None."""
    mod = try_import(module)
    if mod is None:
        missing[key] = why
    else:
        ns[key] = mod
    return mod


def version(mod: Any | None) -> str:
    """``mod.__version__``, ``"?"`` if it has none, ``"not installed"`` for None."""
    return "not installed" if mod is None else str(getattr(mod, "__version__", "?"))


def format_versions(mods: dict[str, Any | None]) -> str:
    """``"name version, name version, ..."`` for a {shown name: module or None} dict."""
    return ", ".join(f"{name} {version(mod)}" for name, mod in mods.items())


# ---------------------------------------------------------------------------- timing


def _compile_timed(src: str, func: str, stmt: str, ns: dict[str, Any],
                   clock: Callable[[], Any]) -> Callable[..., Any]:
    """Exec ``src`` (which defines ``func`` using ``_clock``) with ``ns`` as its globals."""
    g = dict(ns)
    g["_clock"] = clock
    exec(compile(src, f"<bench {stmt}>", "exec"), g)  # our own fixed strings
    return g[func]


def make_loop(stmt: str, ns: dict[str, Any]) -> Callable[[int], int]:
    """Compile ``for _ in range(n): <stmt>`` into a function of ``n`` returning elapsed ns.

    The statement is compiled in place (like timeit), so no extra Python call frame
    (lambda, partial) is added to either side of a comparison; names in ``stmt`` are
    looked up in ``ns`` as fast globals."""
    src = (
        "def _loop(_n, _clock=_clock):\n"
        "    _it = range(_n)\n"
        "    _t0 = _clock()\n"
        "    for _ in _it:\n"
        f"        {stmt}\n"
        "    return _clock() - _t0\n"
    )
    return _compile_timed(src, "_loop", stmt, ns, time.perf_counter_ns)


def make_once(stmt: str, ns: dict[str, Any]) -> Callable[[], float]:
    """Compile ``<stmt>`` once into a function returning its elapsed seconds
    (``time.perf_counter``), for statements slow enough to time one call at a time. Same
    in-place compilation as :func:`make_loop`."""
    src = (
        "def _once(_clock=_clock):\n"
        "    _t0 = _clock()\n"
        f"    {stmt}\n"
        "    return _clock() - _t0\n"
    )
    return _compile_timed(src, "_once", stmt, ns, time.perf_counter)


def sample_interleaved(
    fns: Sequence[Callable[[], float] | None], samples: int
) -> tuple[list[list[float]], list[BaseException | None]]:
    """Take ``samples`` samples of every function, interleaved: each sample calls each
    function once, and the one that goes first rotates (for two: a b, b a, a b, ...), so that
    load and frequency drift hit all equally. The garbage collector is collected, then off
    while sampling. A None entry is skipped; a function that raises is dropped from the
    remaining samples.

    Returns the values per function and, per function, the exception it raised (or None)."""
    values: list[list[float]] = [[] for _ in fns]
    errors: list[BaseException | None] = [None for _ in fns]
    n = len(fns)
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for s in range(samples):
            k = s % n if n else 0
            for i in [*range(k, n), *range(k)]:  # rotate who goes first
                fn = fns[i]
                if fn is None or errors[i] is not None:
                    continue
                try:
                    values[i].append(fn())
                except Exception as exc:  # noqa: BLE001 - reported by the caller
                    errors[i] = exc
    finally:
        if was_enabled:
            gc.enable()
    return values, errors


def error_name(exc: BaseException) -> str:
    """The table cell of a statement that raised: ``error: <ExceptionType>``."""
    return f"error: {type(exc).__name__}"


@dataclass
class Timing:
    """ns per call of one statement (min and median over the samples), or the error it
    raised (``error`` is the table cell, ``detail`` the first line of the message)."""

    min_ns: float | None = None
    med_ns: float | None = None
    error: str | None = None
    detail: str = ""

    def cell(self) -> str:
        """``"min / median"`` with thousands separators, or the error."""
        if self.error:
            return self.error
        return f"{self.min_ns:,.0f} / {self.med_ns:,.0f}"


def median_ratio(a: Timing, b: Timing) -> float | None:
    """``a``'s median over ``b``'s (below 1: ``a`` is faster), or None when either failed."""
    if a.med_ns is None or b.med_ns is None:
        return None
    return a.med_ns / b.med_ns


def measure_pair(
    stmt_a: str, stmt_b: str, ns: dict[str, Any], *, number: int, samples: int, warmup: int
) -> tuple[Timing, Timing]:
    """Time two statements against each other: each compiled by :func:`make_loop`, tried
    once, warmed up with ``warmup`` calls, then ``samples`` samples of ``number`` calls each,
    interleaved (:func:`sample_interleaved`). A statement that raises gets an error instead
    of times; the other is still timed."""
    loops: list[Callable[[], float] | None] = []
    out = [Timing(), Timing()]
    for i, stmt in enumerate((stmt_a, stmt_b)):
        try:
            loop = make_loop(stmt, ns)
            loop(1)  # does it work at all?
            loop(warmup)
        except Exception as exc:  # noqa: BLE001 - reported in the table
            out[i].error = error_name(exc)
            out[i].detail = str(exc).splitlines()[0][:200] if str(exc) else ""
            loops.append(None)
            continue
        loops.append(lambda loop=loop: loop(number) / number)
    per_call, errors = sample_interleaved(loops, samples)
    for i in (0, 1):
        if errors[i] is not None:
            out[i].error = error_name(errors[i])
        elif not out[i].error and per_call[i]:
            out[i].min_ns = min(per_call[i])
            out[i].med_ns = statistics.median(per_call[i])
    return out[0], out[1]


def fmt_ratio(ratio: float | None, none: str = "—") -> str:
    """A ratio as ``"0.85x"``; ``none`` when there is none."""
    return none if ratio is None else f"{ratio:.2f}x"


# ---------------------------------------------------------------------------- environment


def utc_now() -> str:
    """The current time, ``YYYY-MM-DD HH:MM:SS UTC``."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (else ``platform.processor()``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def loadavg() -> str:
    """The 1/5/15-minute load average, ``"a / b / c"``, or ``"unknown"``."""
    try:
        return " / ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def git_rev() -> str:
    """The repository's short HEAD, with ``" (+ uncommitted changes)"`` when tracked files
    differ from it; ``"unknown"`` without git."""
    try:
        rev = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        return rev + (" (+ uncommitted changes)" if dirty else "")
    except Exception:  # noqa: BLE001
        return "unknown"


def native_build(dlbridge: Any | None) -> str:
    """Which compiled extension of ``dlbridge`` was measured: ``"`path` sha256 <12 hex>"``
    (any rebuild with other code changes it; file times do not, as an extension unpacked
    from a wheel carries the wheel's fixed timestamps), ``"unknown"`` if not found."""
    native = getattr(dlbridge, "_native", None)
    path = getattr(native, "__file__", None)
    if not path:
        return "unknown"
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:12]
    try:
        shown = os.path.relpath(path, REPO)
    except ValueError:
        shown = path
    return f"`{shown}` sha256 {digest}"


def command_line(script: str, argv: list[str] | None) -> str:
    """The command to record in a header: ``python`` and ``sys.argv`` as run, or, when
    ``main(argv)`` was called with explicit arguments, ``python <script> <argv>``."""
    if argv is None:
        return shlex.join(["python", *sys.argv])
    return shlex.join(["python", script, *argv])


# ---------------------------------------------------------------------------- results


def write_results(text: str, out: Path | None, name: str, quick: bool) -> Path:
    """Write ``text`` to ``out``, or by default to ``results/<name>.md`` (full runs) or
    ``results/<name>-quick.md`` (``--quick``, git-ignored). Returns the path written."""
    path = out or RESULTS / (f"{name}-quick.md" if quick else f"{name}.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
