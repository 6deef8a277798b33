"""Isolation: every unit runs in a worker subprocess, so a crash or a hang is a result.

Units are batched (by default one worker per producer, running every consumer and case of that
producer) to keep the cost of importing the libraries low. The worker streams one JSON line per
event; when it dies (segfault, abort) or stops answering within the timeout, the unit it was
running is recorded as ``crash`` / ``timeout`` with the step it was in, and a fresh worker
continues with the remaining units. Several batches run in parallel (``jobs``).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .libraries import external_specs

Unit = tuple[str, str, str, str]  # producer, consumer, case id, route

#: steps of a unit where a crash is dlbridge's doing
DLBRIDGE_STAGES = (
    "dlbridge.from_dlpack",
    "inspect dlbridge.Tensor",
    "dlbridge.from_dlpack (second import)",
)


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = pkg_parent + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    # two workers share the machine: keep each library's thread pool small
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.setdefault(var, "1")
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env.setdefault("PYTHONFAULTHANDLER", "1")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _signame(rc: int) -> str:
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


def _crash_fault(
    stage: str, route: str, producer: str, consumer: str, direct_status: str | None,
    direct_checks: list[str],
) -> str:
    if stage in ("make",) or stage.startswith("import"):
        return "producer" if stage == "make" else "peers"
    if stage in DLBRIDGE_STAGES:
        return "dlbridge"
    if route == "dlbridge" and stage.startswith(("consumer", "inspect")):
        if consumer == "dlpack-ref":
            return "dlbridge"
        # a consumer that crashes on the direct exchange too, or that freed a capsule's tensor
        # twice there (memory is corrupted, and the crash comes wherever it lands), crashes on
        # dlbridge's capsule for reasons of its own
        if direct_status in ("crash", "timeout") or "double_free" in direct_checks:
            return "consumer"
        return "dlbridge"
    if consumer == "dlpack-ref":
        return "producer"
    if producer == "dlpack-ref":
        return "consumer"
    return "peers"


class Batch:
    """Runs one list of units to completion, restarting the worker after crashes."""

    def __init__(self, units: list[Unit], *, timeout: float, startup_timeout: float,
                 on_result: Callable[[int, dict], None] | None = None) -> None:
        self.units = units
        self.timeout = timeout
        self.startup_timeout = startup_timeout
        self.results: list[dict | None] = [None] * len(units)
        self.direct: dict[str, dict] = {}
        self.on_result = on_result
        self.restarts = 0
        #: the library that freed a capsule's tensor twice in the running worker process
        #: (None when none has): that memory corruption can crash any later unit there
        self.double_freed_by: str | None = None

    def _record(self, idx: int, r: dict, checks: list[str] | None = None) -> None:
        p, c, case, route = self.units[idx]
        self.results[idx] = r
        if route == "direct":
            self.direct[f"{p}|{c}|{case}"] = {
                "status": r["status"],
                "checks": checks or ([r["check"]] if r.get("check") else []),
            }
        if self.on_result:
            self.on_result(idx, r)

    def run(self) -> list[dict]:
        pending = list(range(len(self.units)))
        while pending:
            pending = self._run_worker(pending)
        return [r for r in self.results if r is not None]

    def _run_worker(self, pending: list[int]) -> list[int]:
        self.double_freed_by = None  # a fresh process
        job = {
            "units": [list(self.units[i]) for i in pending],
            "direct": self.direct,
            "adapters": external_specs(),
        }
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "dlbridge_check.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=_worker_env(),
                start_new_session=True,
            )
            try:
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(json.dumps(job).encode())
                proc.stdin.close()
                return self._read(proc, pending, err)
            finally:
                if proc.poll() is None:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                proc.wait()

    def _read(self, proc: subprocess.Popen, pending: list[int], err) -> list[int]:
        fd = proc.stdout.fileno()  # type: ignore[union-attr]
        buf = b""
        ready = False
        current = -1  # index into pending of the unit in progress
        stage = "start"
        deadline = time.monotonic() + self.startup_timeout
        done_local: set[int] = set()
        while True:
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                # hang
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
                return self._after_death(
                    pending, current, done_local, stage, err, hang=True, ready=ready, rc=None
                )
            r, _, _ = select.select([fd], [], [], min(timeout, 1.0))
            if not r:
                if proc.poll() is not None:
                    # drained? read what is left
                    rest = os.read(fd, 1 << 20)
                    if not rest:
                        proc.wait()
                        return self._after_death(pending, current, done_local, stage, err,
                                                 hang=False, ready=ready, rc=proc.returncode)
                    buf += rest
                else:
                    continue
            else:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    proc.wait()
                    return self._after_death(pending, current, done_local, stage, err,
                                             hang=False, ready=ready, rc=proc.returncode)
                buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                kind = ev.get("event")
                if kind == "ready":
                    ready = True
                    deadline = time.monotonic() + self.timeout
                elif kind == "start":
                    current = ev["unit"]
                    stage = "start"
                    deadline = time.monotonic() + self.timeout
                elif kind == "stage":
                    stage = ev["stage"]
                elif kind == "result":
                    li = ev["unit"]
                    done_local.add(li)
                    self._record(pending[li], ev["result"], ev.get("checks"))
                    self._note_double_free(pending[li], ev["result"], ev.get("checks") or [])
                    current = -1
                    deadline = time.monotonic() + self.timeout
                    if len(done_local) == len(pending):
                        return []

    def _note_double_free(self, idx: int, r: dict, checks: list[str]) -> None:
        if "double_free" in checks and r.get("fault") in ("consumer", "producer"):
            p, c, _, _ = self.units[idx]
            self.double_freed_by = c if r["fault"] == "consumer" else p

    def _after_death(
        self, pending, current, done_local, stage, err, *, hang: bool, ready: bool, rc: int | None
    ) -> list[int]:
        err.seek(0)
        tail = err.read()[-1500:].decode("utf-8", "replace").strip().splitlines()
        tail_txt = " | ".join(line.strip() for line in tail[-6:])
        if not ready or current < 0:
            # died while importing or between units: every remaining unit is affected once
            remaining = [i for i in range(len(pending)) if i not in done_local]
            if not remaining:
                return []
            what = (
                "timed out" if hang else f"died ({_signame(rc) if rc is not None else 'unknown'})"
            )
            if not ready:
                for li in remaining:
                    self._record(
                        pending[li],
                        {
                            "status": "timeout" if hang else "crash",
                            "detail": f"worker {what} while importing "
                                      f"the libraries ({stage}): {tail_txt}",
                            "fault": "peers",
                            "check": "import",
                            "stage": stage,
                        },
                    )
                return []
            current = remaining[0]
        idx = pending[current]
        p, c, case, route = self.units[idx]
        direct = self.direct.get(f"{p}|{c}|{case}", {})
        if hang:
            status = "timeout"
            detail = f"no answer within {self.timeout:.0f} s during {stage}"
        else:
            status = "crash"
            detail = (
                f"the process died ({_signame(rc) if rc is not None else 'unknown'}) during {stage}"
            )
        fault = _crash_fault(stage, route, p, c, direct.get("status"), direct.get("checks", []))
        culprit = self.double_freed_by
        if culprit is not None and not hang:
            fault = "consumer" if culprit == c else "producer" if culprit == p else "peers"
            detail += (f", after {culprit} freed a capsule's tensor twice earlier in this process "
                       f"(a double free corrupts memory, and the crash comes where it lands)")
        r = {
            "status": status,
            "detail": detail + (f" (stderr: {tail_txt})" if tail_txt and not hang else ""),
            "fault": fault,
            "check": status,
            "stage": stage,
        }
        self._record(idx, r)
        self.restarts += 1
        return [pending[i] for i in range(len(pending)) if i not in done_local and i != current]


def run_units(
    units: list[Unit],
    *,
    jobs: int = 2,
    timeout: float = 30.0,
    startup_timeout: float = 180.0,
    group_by: str = "producer",
    progress: Callable[[int, int], None] | None = None,
    timings: dict[str, float] | None = None,
    slow_consumers: frozenset[str] = frozenset(),
) -> list[dict]:
    """Run every unit; returns one result dict per unit (with producer/consumer/case/route).

    With ``group_by="producer"``, the units of a consumer in ``slow_consumers`` (one whose import
    takes seconds) form one batch of their own instead of joining every producer's batch, so the
    library is imported once rather than once per producer.

    ``timings`` (optional) receives the wall time of each batch and its worker restarts."""
    groups: dict[tuple, list[int]] = {}
    for i, u in enumerate(units):
        key: tuple[str, ...]
        if group_by == "producer":
            key = ("consumer", u[1]) if u[1] in slow_consumers else (u[0],)
        elif group_by == "pair":
            key = (u[0], u[1])
        elif group_by == "case":
            key = (u[0], u[1], u[2])
        else:
            key = ()
        groups.setdefault(key, []).append(i)
    # biggest batches first, for a better parallel finish
    ordered = sorted(groups.values(), key=len, reverse=True)
    out: list[dict | None] = [None] * len(units)
    done = [0]
    lock = threading.Lock()

    def run_group(idxs: list[int]) -> None:
        sub = [units[i] for i in idxs]

        def on_result(li: int, r: dict) -> None:
            with lock:
                done[0] += 1
                if progress:
                    progress(done[0], len(units))

        b = Batch(sub, timeout=timeout, startup_timeout=startup_timeout, on_result=on_result)
        t0 = time.monotonic()
        res = b.run()
        if timings is not None:
            if group_by != "producer":
                name = f"{sub[0][0]}|{sub[0][1]}|{len(sub)}"
            elif sub[0][1] in slow_consumers:
                name = f"consumer {sub[0][1]}"
            else:
                name = "|".join(sorted({u[0] for u in sub}))
            with lock:
                timings[name] = round(time.monotonic() - t0, 2)
                if b.restarts:
                    timings[name + " (worker restarts)"] = b.restarts
        for li, r in zip(range(len(sub)), b.results):
            p, c, case, route = sub[li]
            if r is None:
                r = {
                    "status": "error",
                    "detail": "no result (checker error)",
                    "fault": "checker",
                    "check": "checker",
                }
            out[idxs[li]] = {"case": case, "producer": p, "consumer": c, "route": route, **r}
        del res

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        list(ex.map(run_group, ordered))
    return [r for r in out if r is not None]
