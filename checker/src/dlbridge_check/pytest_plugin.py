"""pytest plugin: ``pytest --dlbridge-check=LIB`` turns the conformance checker's exchanges of
one array library into test items, for that library's own CI.

Every exchange the checker runs directly (``consumer.from_dlpack(x)``, not through dlbridge)
with LIB as producer or consumer becomes one item, named ``producer→consumer/case`` (e.g.
``numpy→torch/layout/transposed``), under a collector named ``dlbridge-check``. Outcomes:

- pass: the exchange is right;
- skip: the exchange is unsupported (a refusal the checker accepts), or a peer named by
  ``--dlbridge-peers`` is not installed (one item for that peer);
- fail: a finding against LIB (alone or together with its peer); the message names the case,
  the catalog entries (C1 ...) it is about, the detail and the way out;
- xfail: a finding against the other library only (not LIB's to fix), the reason names it;
- fail with "not a finding against LIB": the checker or dlbridge failed (report it to dlbridge).

The checker runs once per session, at collection, in its own worker processes. pytest loads
:mod:`_dlbridge_pytest` (the options) in every run of a venv that has dlbridge-check; it imports
this module, and with it dlbridge, only when ``--dlbridge-check`` is given.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

#: between producer and consumer in an item's name
ARROW = "→"
#: the name of the collector that holds the items
COLLECTOR = "dlbridge-check"
#: the library under test, as the checker names it (set when --dlbridge-check is given)
LIBRARY = pytest.StashKey[str]()


def _names(value: str | None) -> list[str] | None:
    """A comma-separated option as a list (None when not given)."""
    return [x.strip() for x in value.split(",") if x.strip()] if value else None


def pytest_configure(config: pytest.Config) -> None:
    """Refuse a wrong --dlbridge-check, --dlbridge-peers or --dlbridge-cases before collecting,
    with the checker's own messages."""
    lib = config.getoption("dlbridge_check")
    if lib is None:
        return
    if sys.platform == "win32":
        raise pytest.UsageError(
            "--dlbridge-check: the checker runs on Linux and macOS, not on Windows (its workers "
            "are isolated in POSIX process groups)"
        )
    from . import _usage_error
    from .cases import select
    from .libraries import discover, use_names

    peers = _names(config.getoption("dlbridge_peers")) or []
    wrong = _usage_error([lib, *peers], None)
    if wrong:
        raise pytest.UsageError(f"--dlbridge-check / --dlbridge-peers: {wrong}")
    # LIB as the checker names it in its results (an adapter's name for module:object)
    name = (use_names([lib]) or [lib])[0]
    found = {d.name: d for d in discover([name])}
    if not found[name].installed:
        why = f" ({found[name].reason})" if found[name].reason else ""
        raise pytest.UsageError(f"--dlbridge-check: {lib} is not installed here{why}")
    config.stash[LIBRARY] = name
    cases = _names(config.getoption("dlbridge_cases"))
    if cases and not select(cases):
        raise pytest.UsageError(
            f"--dlbridge-cases: no case matches {config.getoption('dlbridge_cases')!r}; see "
            "python -m dlbridge check --list-cases"
        )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Add the checker's items to whatever else was collected (also to nothing: no test file
    is needed), before -k, -m and --deselect choose among them."""
    if LIBRARY not in config.stash:
        return
    # the session's nodeid is "": without its own nodeid the collector's would be "::name"
    collector = CheckCollector.from_parent(session, name=COLLECTOR, nodeid=COLLECTOR,
                                           lib=config.stash[LIBRARY])
    items.extend(session.genitems(collector))


class CheckCollector(pytest.Collector):
    """Runs the checker once, for LIB against its peers, and yields an item per direct
    exchange of LIB's (and one per peer asked for but not installed)."""

    def __init__(self, *, lib: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lib = lib

    def collect(self) -> list[pytest.Item]:
        from . import run_check

        config = self.config
        peers = _names(config.getoption("dlbridge_peers"))
        # without peers: every library, LIB's adapter from outside dlbridge (resolved at
        # configure) included
        doc, _, _ = run_check(
            [config.getoption("dlbridge_check"), *peers] if peers else None,
            _names(config.getoption("dlbridge_cases")),
            jobs=config.getoption("dlbridge_jobs"),
            involving=self.lib,
        )
        items: list[pytest.Item] = []
        absent = {d["name"]: d for d in doc["libraries_detail"] if not d["installed"]}
        for peer in peers or []:
            if peer in absent:
                items.append(MissingPeer.from_parent(
                    self, name=f"{self.lib}↔{peer}", lib=self.lib, peer=absent[peer]
                ))
        for r in doc["results"]:  # of LIB's pairs only (involving=)
            if r["route"] == "direct":
                name = f"{r['producer']}{ARROW}{r['consumer']}/{r['case']}"
                items.append(CheckItem.from_parent(self, name=name, lib=self.lib, result=r,
                                                   doc=doc))
        return items


class MissingPeer(pytest.Item):
    """A peer named by --dlbridge-peers that is not installed: skipped, saying so."""

    def __init__(self, *, lib: str, peer: dict, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lib = lib
        self.peer = peer

    def runtest(self) -> None:
        why = f" ({self.peer['reason']})" if self.peer.get("reason") else ""
        pytest.skip(f"{self.peer['name']} is not installed here{why}: its exchanges with "
                    f"{self.lib} are not checked")

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.name


class CheckItem(pytest.Item):
    """One direct exchange of the checker's run: its result decides the outcome."""

    def __init__(self, *, lib: str, result: dict, doc: dict, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lib = lib
        self.result = result
        self.doc = doc

    def runtest(self) -> None:
        from . import report

        r = self.result
        if r["status"] == "pass":
            return
        if r["status"] not in report.BAD:
            pytest.skip(f"{r['status']}: {r['detail']}")
        at_fault = report.against(r)
        if any(name == self.lib for name, _ in at_fault):
            pytest.fail(self._message(f"a finding against {self.lib}"), pytrace=False)
        if at_fault:
            others = ", ".join(f"{name} as {role}" for name, role in at_fault)
            pytest.xfail(f"a finding against {others}, not {self.lib}: {r['detail']}")
        who = "dlbridge" if r.get("fault") == "dlbridge" else "the checker"
        pytest.fail(
            self._message(f"not a finding against {self.lib}: {who} failed this exchange "
                          "(please report it to dlbridge: \"Reporting a bug\" on the "
                          "Troubleshooting page of its documentation says what to attach)"),
            pytrace=False,
        )

    def _message(self, headline: str) -> str:
        """The failure message: the case, the catalog entries, the detail and the way out
        (as the checker's reports word them)."""
        from . import report
        from .cases import BY_ID

        r = self.result
        (group,) = report.group_findings(self.doc["results"], keep=lambda x: x is r)
        case = BY_ID[r["case"]]
        lines = [f"[{r['status']}] {headline}", f"case: {r['case']}: {case.title}"]
        for ref in group["refs"]:
            entry = self.doc["catalog"].get(ref)
            lines.append(f"catalog: {ref}" + (f": {entry['input']}" if entry else ""))
        lines.append(f"detail: {r['detail']}")
        if group["workaround"]:
            lines.append(f"way out: {group['workaround']}")
        return "\n".join(lines)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.name
