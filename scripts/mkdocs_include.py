"""MkDocs hook: a page includes a file of the repository between two HTML comments, so that
it reads well in the repository too, where the comments are hidden and the link between them
shows:

    <!-- include: benches/results/copy.md -->
    The table is [benches/results/copy.md](../benches/results/copy.md).
    <!-- end include -->

On the site the lines between the comments become the file's text; ``include-code:`` puts it
in a code block, highlighted by its extension (``.py``, ``.toml``; anything else as text).
Paths are relative to the repository root; a missing file fails the build."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r"^<!-- include(-code)?: (\S+) -->\n.*?^<!-- end include -->$", re.M | re.S)


LANGUAGES = {".py": "python", ".toml": "toml"}


def _included(match: re.Match[str]) -> str:
    path = REPO / match.group(2)
    text = path.read_text(encoding="utf-8").rstrip()
    if not match.group(1):
        return text
    return f"```{LANGUAGES.get(path.suffix, 'text')}\n{text}\n```"


def on_page_markdown(markdown: str, **_: Any) -> str:
    """The page's Markdown with every include region replaced by the file it names."""
    return INCLUDE.sub(_included, markdown)
