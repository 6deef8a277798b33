"""The known problems: loading ``known_problems.json`` (shipped in this package) and matching
its entries against an environment.

An entry applies when every condition of its ``when`` holds: a distribution installed in a
version range, sometimes a second one with its own range, the interpreter's build, an ABI tag
of dlbridge's wheel. The file's ``about`` field says the same for whoever edits it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from .versions import satisfies

_CONDITIONS = frozenset({"distribution", "versions", "also", "build", "dlbridge_wheel_abi"})
_BUILDS = frozenset({"free-threaded", "gil"})


@dataclass(frozen=True)
class Problem:
    id: str
    when: dict[str, Any]
    problem: str
    source: str
    fix: str

    def distributions(self) -> list[str]:
        """The distributions whose versions the entry's conditions name."""
        names = [self.when.get("distribution"), self.when.get("also", {}).get("distribution")]
        return [n for n in names if n]


@dataclass(frozen=True)
class Facts:
    """What an entry is matched against."""

    #: installed version of a distribution by name (None: not installed)
    version_of: Callable[[str], str | None]
    free_threaded: bool
    #: the ABI tags of dlbridge's wheel (``abi3``, ``cp314t``...)
    wheel_abis: frozenset[str]


def load() -> list[Problem]:
    """The entries of the package's ``known_problems.json``; ValueError for a malformed one."""
    text = resources.files(__package__).joinpath("known_problems.json").read_text("utf-8")
    return [_entry(raw) for raw in json.loads(text)["problems"]]


def _entry(raw: dict[str, Any]) -> Problem:
    problem = Problem(raw["id"], raw["when"], raw["problem"], raw["source"], raw["fix"])
    when = problem.when
    unknown = set(when) - _CONDITIONS
    if unknown or not when:
        raise ValueError(f"known problem {problem.id}: unknown or no conditions {sorted(unknown)}")
    if "build" in when and when["build"] not in _BUILDS:
        raise ValueError(f"known problem {problem.id}: build is one of {sorted(_BUILDS)}")
    for name, spec in _ranges(when):
        satisfies("0", spec)  # ValueError now for a range this comparator cannot read
        if not name:
            raise ValueError(f"known problem {problem.id}: a version range names no distribution")
    return problem


def _ranges(when: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for cond in (when, when.get("also")):
        if cond and ("distribution" in cond or "versions" in cond):
            out.append((cond.get("distribution", ""), cond.get("versions", "")))
    return out


def applies(problem: Problem, facts: Facts) -> bool:
    when = problem.when
    for dist, spec in _ranges(when):
        version = facts.version_of(dist)
        if version is None:
            return False
        try:
            if not satisfies(version, spec):
                return False
        except ValueError:  # a version PEP 440 does not order: no range can claim it
            return False
    if "build" in when and (when["build"] == "free-threaded") != facts.free_threaded:
        return False
    return "dlbridge_wheel_abi" not in when or when["dlbridge_wheel_abi"] in facts.wheel_abis


def matching(facts: Facts, problems: list[Problem] | None = None) -> list[Problem]:
    """The known problems that apply under ``facts``."""
    return [p for p in (load() if problems is None else problems) if applies(p, facts)]
