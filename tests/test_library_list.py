"""The registry of namespaces is the one list of the libraries dlbridge knows: scripts/test.sh
reads their distributions from it (``dlbridge.libraries.known_libraries()``, each library's
``pip`` spec) instead of keeping a list of its own."""

from __future__ import annotations

import re
from pathlib import Path

from dlbridge.libraries import known_libraries

ROOT = Path(__file__).resolve().parent.parent


def test_the_test_script_reads_the_libraries_from_the_registry():
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert "known_libraries()" in script
    dists = {
        re.split(r"[\[<>=!~; ]", spec, maxsplit=1)[0]
        for lib in known_libraries()
        for spec in lib.pip.split()
    } - {"dlbridge"}  # the package itself, which the script lists first
    listed = sorted(d for d in dists if re.search(rf"[\"']{re.escape(d)}[\"']", script))
    assert not listed, f"scripts/test.sh lists registry libraries itself: {listed}"
