"""The conformance checker's pytest plugin as pytest loads it, through its ``pytest11`` entry
point, in every run of a venv that has dlbridge-check: the options, and nothing else. The plugin
itself, :mod:`dlbridge_check.pytest_plugin`, is imported and registered only when
``--dlbridge-check`` is given, so that a run without it imports neither the checker nor dlbridge
(its compiled extension included).
"""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dlbridge", "dlbridge conformance checker")
    group.addoption(
        "--dlbridge-check",
        metavar="LIB",
        help="run dlbridge's conformance checker for the array library LIB (any name the "
        "checker's --libraries takes: one of its libraries, an adapter's entry point, "
        "module:object naming an adapter, a module with __array_namespace__): each exchange LIB "
        "makes directly with a peer library (as producer and as consumer) is one test item "
        "'producer→consumer/case'; a finding against LIB fails, one against the peer only "
        "xfails, an unsupported exchange skips",
    )
    group.addoption(
        "--dlbridge-peers",
        metavar="LIB[,LIB...]",
        help="with --dlbridge-check: the peer libraries to exchange with (default: every "
        "installed one the checker knows); the checker's reference producer/consumer "
        "(dlpack-ref) and python (memoryview) are always peers; a peer named here that is not "
        "installed gives one skipped item",
    )
    group.addoption(
        "--dlbridge-cases",
        metavar="CASES",
        help="with --dlbridge-check: comma-separated case ids, globs (layout/*), features "
        "(dtype) or catalog cases (C13), as the checker's --cases (default: every case)",
    )
    group.addoption(
        "--dlbridge-jobs",
        metavar="N",
        type=int,
        default=os.cpu_count() or 2,
        help="with --dlbridge-check: the checker's worker processes in parallel (default: CPU "
        "count)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Register the plugin when it is asked for (its own ``pytest_configure`` then runs)."""
    if config.getoption("dlbridge_check") is not None:
        from dlbridge_check import pytest_plugin

        config.pluginmanager.register(pytest_plugin, "dlbridge_check.pytest_plugin")
