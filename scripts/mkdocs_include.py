"""MkDocs hook: a page includes a file of the repository between two HTML comments, so that
it reads well in the repository too, where the comments are hidden and the link between them
shows:

    <!-- include: benches/results/copy.md -->
    The table is [benches/results/copy.md](../benches/results/copy.md).
    <!-- end include -->

On the site the lines between the comments become the file's text; ``include-code:`` puts it
in a ``text`` code block. Paths are relative to the repository root; a missing file fails the
build."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r"^<!-- include(-code)?: (\S+) -->\n.*?^<!-- end include -->$", re.M | re.S)


def _included(match: re.Match[str]) -> str:
    text = (REPO / match.group(2)).read_text(encoding="utf-8").rstrip()
    return f"```text\n{text}\n```" if match.group(1) else text


def on_page_markdown(markdown: str, **_: Any) -> str:
    """The page's Markdown with every include region replaced by the file it names."""
    return INCLUDE.sub(_included, markdown)
