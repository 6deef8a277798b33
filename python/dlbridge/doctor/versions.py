"""Version numbers as PEP 440 orders them, and the ranges of the known problems.

A small comparator of our own, because ``packaging`` is not a dependency of dlbridge: it
reads epochs, release segments, pre-releases (``a``, ``b``, ``rc`` and their spelled-out
forms), post-releases and development releases, and ignores local labels (``+cu128``), which
name a build of the same release. A range is comma-separated clauses that must all hold:
``<``, ``<=``, ``>``, ``>=``, ``==``, ``!=``, where ``==2.6.*`` matches a release series.
"""

from __future__ import annotations

import re

_VERSION = re.compile(
    r"""^v?(?:(?P<epoch>\d+)!)?(?P<release>\d+(?:\.\d+)*)
    (?:[-_.]?(?P<pre>a|alpha|b|beta|c|rc|pre|preview)[-_.]?(?P<pre_n>\d*))?
    (?:-(?P<post_implicit>\d+)|[-_.]?(?:post|rev|r)[-_.]?(?P<post>\d*))?
    (?:[-_.]?dev[-_.]?(?P<dev>\d*))?
    (?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?$""",
    re.VERBOSE | re.IGNORECASE,
)
_PRE_ORDER = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}
_CLAUSE = re.compile(r"^(<=|>=|==|!=|<|>)\s*(\S+)$")

# Sort keys: a plain release sorts after its pre-releases and before its post-releases; a
# development release sorts before everything else of the same segment.
_NONE_LOW, _NONE_HIGH = (-1, -1), (10**9, 0)

Key = tuple[int, tuple[int, ...], tuple[int, int], tuple[int, int], tuple[int, int]]


def key(version: str) -> Key:
    """The sort key of ``version``; ValueError when it is not a PEP 440 version."""
    m = _VERSION.match(version.strip())
    if m is None:
        raise ValueError(f"{version!r} is not a version number")
    release = tuple(int(x) for x in m["release"].split("."))
    while len(release) > 1 and release[-1] == 0:  # 2.6 == 2.6.0
        release = release[:-1]
    pre = (_PRE_ORDER[m["pre"].lower()], int(m["pre_n"] or 0)) if m["pre"] else None
    post_n = m["post_implicit"] or m["post"]
    has_post = m["post_implicit"] is not None or m["post"] is not None
    post = (0, int(post_n or 0)) if has_post else _NONE_LOW
    dev = (0, int(m["dev"] or 0)) if m["dev"] is not None else _NONE_HIGH
    if pre is None:
        # 1.0.dev1 sorts before 1.0a1; 1.0 after every pre-release of it
        pre = (-1, 0) if m["dev"] is not None and not has_post else _NONE_HIGH
    return (int(m["epoch"] or 0), release, pre, post, dev)


def _series_match(version: str, prefix: str) -> bool:
    """``version`` is a release of the series ``prefix`` (``==2.6.*``)."""
    want = key(prefix)[1]
    have = key(version)[1] + (0,) * len(want)
    return key(version)[0] == key(prefix)[0] and have[: len(want)] == want


def satisfies(version: str, spec: str) -> bool:
    """``version`` lies in the range ``spec`` (``">=0.1,<0.1.11"``; empty: every version).
    ValueError for a clause or version this module does not read."""
    v = key(version)
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        m = _CLAUSE.match(clause)
        if m is None:
            raise ValueError(f"{clause!r} is not a version clause (<, <=, >, >=, ==, !=)")
        op, bound = m.groups()
        if bound.endswith(".*"):
            if op not in ("==", "!="):
                raise ValueError(f"{clause!r}: a wildcard goes with == or != only")
            if _series_match(version, bound[:-2]) != (op == "=="):
                return False
            continue
        b = key(bound)
        holds = {
            "<": v < b, "<=": v <= b, ">": v > b, ">=": v >= b, "==": v == b, "!=": v != b,
        }[op]
        if not holds:
            return False
    return True
