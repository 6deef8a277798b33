"""The documentation's pages read well in the repository as on the site, and say what is new:

- no raw include directive is left where a reader lands: a page includes a file through an
  ``<!-- include: PATH -->`` region (scripts/mkdocs_include.py), which shows a link in the
  repository, and every region names a file that exists;
- "new in the next release" marks only what the CHANGELOG's [Unreleased] section holds: once a
  release empties that section, no page may still carry the marker;
- the README's links to pages of the site point at pages that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = sorted((REPO / "docs").rglob("*.md"))
MARKER = re.compile(r"new in the\s+next release", re.I)


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(REPO)) for p in paths]


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_no_raw_include_directive(page):
    text = page.read_text(encoding="utf-8")
    assert "--8<--" not in text, "use an <!-- include: PATH --> region (scripts/mkdocs_include.py)"
    opened = re.findall(r"^<!-- include(?:-code)?: (\S+) -->$", text, re.M)
    assert len(opened) == len(re.findall(r"^<!-- end include -->$", text, re.M))
    assert [p for p in opened if not (REPO / p).is_file()] == []


def test_the_include_hook_puts_the_file_in_the_page():
    import importlib.util

    path = REPO / "scripts" / "mkdocs_include.py"
    spec = importlib.util.spec_from_file_location("mkdocs_include", path)
    assert spec and spec.loader
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    page = ("before\n<!-- include-code: pyproject.toml -->\n[a link](x)\n"
            "<!-- end include -->\nafter\n")
    out = hook.on_page_markdown(page)
    toml = (REPO / "pyproject.toml").read_text(encoding="utf-8").rstrip()
    assert out == f"before\n```toml\n{toml}\n```\nafter\n"


def _unreleased() -> str:
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    return changelog.split("## [Unreleased]", 1)[1].split("\n## [", 1)[0]


def test_new_in_markers_follow_the_changelog():
    marked = [p.name for p in PAGES if MARKER.search(p.read_text(encoding="utf-8"))]
    if not re.search(r"^- ", _unreleased(), re.M):
        assert marked == [], "the [Unreleased] section is empty: these pages still say 'new'"
    else:
        # the unreleased features the pages describe carry the marker
        assert {"check-your-library.md", "checker.md", "devices.md", "numpy.md"} <= set(marked)


def test_readme_links_to_pages_that_exist():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links
    assert [link for link in links if not (REPO / link).is_file()] == []


@pytest.mark.parametrize(
    ("page", "package"),
    [("warp", "warp"), ("mlx", "mlx"), ("jax", "jax"), ("tensorflow", "tensorflow")],
)
def test_library_pages_say_what_dlbridge_does_with_their_legacy_capsules(page, package):
    """These libraries export legacy capsules, which cannot say read-only: the page's first
    point (the library into dlbridge) says writable exactly when the package is in dlbridge's
    published table, as the import does."""
    from dlbridge.libraries import LEGACY_CAPSULES_WRITABLE

    text = (REPO / "docs" / "libraries" / f"{page}.md").read_text()
    first = text.split("\n- ", 2)[1]  # the first point of the page's first list
    assert "legacy" in first
    writable = package in LEGACY_CAPSULES_WRITABLE
    assert ("**writable**" in first, "**read-only**" in first) == (writable, not writable), first
