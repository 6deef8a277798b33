"""What users read keeps its promises: the examples of the README and of the documentation
site (their ``pycon`` blocks) run as written, and none of it names internal files or tracker
numbers."""

from __future__ import annotations

import ast
import doctest
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def tour() -> str:
    """The ``pycon`` block under the README's "A 30-second tour" heading."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## A 30-second tour", 1)[1]
    match = re.search(r"```pycon\n(.*?)```", section, re.DOTALL)
    assert match, "the tour has no pycon block"
    return match.group(1)


def test_readme_tour_runs_as_written():
    pytest.importorskip("numpy")
    pytest.importorskip("torch")
    test = doctest.DocTestParser().get_doctest(tour(), {}, "README tour", "README.md", 0)
    assert len(test.examples) >= 10
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, (
        f"{result.failed} of {result.attempted} tour lines differ (see above)"
    )


def pages_with_examples() -> list[Path]:
    return [p for p in sorted((REPO / "docs").rglob("*.md")) if "```pycon" in p.read_text()]


@pytest.mark.parametrize("page", pages_with_examples(), ids=lambda p: str(p.relative_to(REPO)))
def test_docs_examples_run_as_written(page):
    pytest.importorskip("numpy")
    pytest.importorskip("torch")
    pytest.importorskip("pyarrow")
    blocks = re.findall(r"```pycon\n(.*?)```", page.read_text(), re.DOTALL)
    parser = doctest.DocTestParser()
    # one namespace per page: its examples build on each other, as a reader's session would
    test = parser.get_doctest("\n".join(blocks), {}, page.name, str(page), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted >= 3
    assert result.failed == 0, (
        f"{result.failed} of {result.attempted} example lines differ (see above)"
    )


def user_facing_texts() -> list[Path]:
    """README, CONTRIBUTING, the crate's README, the site's pages and the benchmark tables it
    includes."""
    pages = sorted((REPO / "docs").rglob("*.md"))
    tables = sorted((REPO / "benches" / "results").glob("*.md"))
    crate_readmes = sorted((REPO / "crates").glob("*/README.md"))
    return [REPO / "README.md", REPO / "CONTRIBUTING.md", *crate_readmes, *pages, *tables]


def rust_doc_comments(path: Path) -> str:
    """The ``///`` and ``//!`` lines of a Rust source: what rustdoc publishes on docs.rs."""
    lines = path.read_text().splitlines()
    return "\n".join(line for line in lines if re.match(r"\s*//[/!]", line))


def docstrings(path: Path) -> str:
    """Every docstring of a Python module or stub: what help() and the API pages show."""
    tree = ast.parse(path.read_text())
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    found = (ast.get_docstring(node) for node in ast.walk(tree) if isinstance(node, kinds))
    return "\n".join(doc for doc in found if doc)


def documented_sources() -> list[Path]:
    """The Rust crates' sources and the Python packages' modules and stubs."""
    rust = sorted((REPO / "crates").rglob("*.rs"))
    python = sorted((REPO / "python").rglob("*.py")) + sorted((REPO / "python").rglob("*.pyi"))
    return rust + python


# the project's tracker numbers are small; upstream bug numbers (numpy#20742) are facts
INTERNAL = (r"CASES\.md", r"DECISIONS", r"\.\./shared", r"(?i:\bissues? \d{1,2}\b)")


@pytest.mark.parametrize("path", user_facing_texts(), ids=lambda p: str(p.relative_to(REPO)))
def test_user_facing_text_names_no_internal_files_or_tracker_numbers(path):
    text = path.read_text()
    for pattern in INTERNAL:
        assert not re.search(pattern, text), f"{path.name}: {pattern}"


@pytest.mark.parametrize("path", documented_sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_doc_comments_and_docstrings_name_no_internal_files_or_tracker_numbers(path):
    text = rust_doc_comments(path) if path.suffix == ".rs" else docstrings(path)
    for pattern in INTERNAL:
        assert not re.search(pattern, text), f"{path.relative_to(REPO)}: {pattern}"


def test_the_doc_readers_see_the_docs():
    """The readers above find what they check: a reader that found nothing would pass any
    text."""
    assert "DLPack" in rust_doc_comments(REPO / "crates" / "dlbridge" / "src" / "lib.rs")
    assert "DLPack" in docstrings(REPO / "python" / "dlbridge" / "convert.py")
