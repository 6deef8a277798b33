"""Every ``python`` block of the documentation site runs: each is saved as a script and run in
a fresh interpreter, in a folder of its own, and must exit 0. A block whose imports are not
installed is skipped, and says which. (The ``pycon`` blocks are doctested by test_readme.py,
the README's ``python`` blocks run in test_readme_processes.py.)

The pages call the reader's own library ``mylib``; a block that reads a checker report gets
one, made by a short run of the checker, and runs with ``numpy`` in the place of ``mylib``."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_readme_processes import SECTIONS, section, top_level_modules

REPO = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def doc_blocks() -> list[tuple[str, str]]:
    """(id, code) for every fenced ``python`` block of the pages under docs/."""
    blocks = []
    for page in sorted((REPO / "docs").rglob("*.md")):
        for i, code in enumerate(BLOCK.findall(page.read_text(encoding="utf-8"))):
            blocks.append((f"{page.relative_to(REPO / 'docs')}-{i}", code))
    return blocks


BLOCKS = doc_blocks()


def test_every_readme_python_block_is_run():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    run = sum(len(BLOCK.findall(section(readme, title))) for title in SECTIONS)
    assert run == len(BLOCK.findall(readme)), "a README python block outside the tested sections"


def _report(folder: Path, env: dict[str, str]) -> None:
    """A small checker report in ``folder``/report.json, of the kind the pages read."""
    run = subprocess.run(
        [sys.executable, "-m", "dlbridge", "check", "--libraries", "numpy",
         "--cases", "readonly/contiguous", "--jobs", "1", "-q", "--json", "report.json"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode in (0, 3), run.stdout + run.stderr


@pytest.mark.parametrize("code", [code for _, code in BLOCKS], ids=[name for name, _ in BLOCKS])
def test_docs_python_block_runs(code, tmp_path):
    for module in sorted(top_level_modules(code)):
        if module != "mylib" and importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    if "report.json" in code:
        _report(tmp_path, env)
        code = code.replace('"mylib"', '"numpy"')
    script = tmp_path / "example.py"
    script.write_text(code)
    run = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,
    )
    assert run.returncode == 0, f"stdout:\n{run.stdout[-3000:]}\nstderr:\n{run.stderr[-3000:]}"
