"""The README's examples run as written: each ``python`` block of the sections listed here is
saved as a script and run in a fresh interpreter (so that ``multiprocessing`` with spawn or
forkserver, Ray and Dask workers can import its functions from ``__main__``); it must exit 0.
A block whose imports are not installed is skipped."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
SECTIONS = ["Processes and machines"]


def section(text: str, title: str) -> str:
    """The text of the ``## title`` section, up to the next ``## `` heading."""
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def python_blocks() -> list[tuple[str, str]]:
    """(id, code) for every fenced ``python`` block of the listed sections."""
    text = README.read_text()
    blocks = []
    for title in SECTIONS:
        for i, code in enumerate(re.findall(r"```python\n(.*?)```", section(text, title), re.S)):
            blocks.append((f"{title.split()[0].lower()}-{i}", code))
    return blocks


def top_level_modules(code: str) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module.split(".")[0])
    return modules


BLOCKS = python_blocks()


def test_the_sections_have_examples():
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("code", [code for _, code in BLOCKS], ids=[name for name, _ in BLOCKS])
def test_readme_example_runs(code, tmp_path):
    for module in sorted(top_level_modules(code)):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    script = tmp_path / "example.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    run = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,
    )
    assert run.returncode == 0, f"stdout:\n{run.stdout[-3000:]}\nstderr:\n{run.stderr[-3000:]}"
