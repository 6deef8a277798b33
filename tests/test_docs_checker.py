"""The checker's pages say what the code does: docs/checker.md's options are the parser's, its
exit statuses are the report's and each cause of status 2 gives 2, its glossary of statuses is
the one the HTML report's legend shows, its table of libraries is the checker's list, and
every library named after ``--libraries`` in the docs is a name the checker takes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import dlbridge

pytest.importorskip("numpy")

from dlbridge_check import (
    _parser,
    main,
    report,
    run_check,
)
from dlbridge_check.libraries import ALL_LIBRARIES, use_names

REPO = Path(__file__).resolve().parent.parent
CHECKER = (REPO / "docs" / "checker.md").read_text(encoding="utf-8")

#: the names the pages give to libraries of their own examples, which the checker does not know
EXAMPLE_NAMES = {
    "mylib", "goodarray", "leakyarray", "mylib_check:MyLibAdapter",
    "mylib._dlbridge_check:MyLibAdapter", "ortvalue_adapter:OrtValueAdapter",
}


NO_NUMPY = "python -m dlbridge check needs NumPy to compare values"


def section(title: str) -> str:
    """The text of the page's ``## title`` section."""
    return CHECKER.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def first_cells(text: str) -> list[str]:
    """The first cell of each row of the Markdown tables in ``text`` (header rows included)."""
    return [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ")]


def test_options_are_the_parser_options():
    documented = {
        flag for cell in first_cells(section("Options"))
        for flag in re.findall(r"`(-[-\w]+)", cell)
    }
    actual = {s for action in _parser()._actions for s in action.option_strings}
    assert documented == actual


def test_isolate_choices_and_defaults_are_the_parser_ones():
    actions = {a.dest: a for a in _parser()._actions}
    row = next(line for line in section("Options").splitlines() if "`--isolate" in line)
    assert row.split("`")[1] == "--isolate " + "\\|".join(actions["isolate"].choices)
    assert f"one worker process per {actions['isolate'].default} (default)" in row
    timeout = next(line for line in section("Options").splitlines() if "`--timeout" in line)
    assert f"(default {actions['timeout'].default:g})" in timeout


def test_exit_statuses_are_the_report_ones():
    statuses = {int(c) for c in first_cells(section("Exit status")) if c.isdigit()}
    assert statuses == {0, report.EXIT_DLBRIDGE, report.EXIT_USAGE, report.EXIT_FAIL_ON}


@pytest.mark.parametrize(
    "argv, says",
    [(["--libraries", "nosuchlibrary"], "unknown library nosuchlibrary"),
     (["--libraries", "numpy", "--fail-on", "torch"], "--fail-on names libraries"),
     (["--cases", "nosuchcase"], "no case matches")],
    ids=["unknown library", "fail-on not checked", "no case matches"],
)
def test_each_usage_error_of_the_page_exits_2(argv, says, capsys):
    assert main(argv) == report.EXIT_USAGE
    assert says in capsys.readouterr().err


def test_troubleshooting_quotes_the_checker_messages():
    # the symptoms of the troubleshooting page quote these two messages of the checker
    page = (REPO / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    assert "`unknown library`" in page
    assert f"`{NO_NUMPY}`" in page


def test_windows_exits_2(monkeypatch, capsys):
    # no Windows machine here: the platform test is the only code that reads sys.platform
    monkeypatch.setattr(sys, "platform", "win32")
    assert main(["--libraries", "numpy"]) == report.EXIT_USAGE
    assert "not on Windows" in capsys.readouterr().err
    assert "Windows" in section("Exit status")


def test_no_numpy_exits_2():
    code = ("import sys; sys.modules['numpy'] = None\n"
            "from dlbridge.__main__ import main; sys.exit(main(['check']))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == report.EXIT_USAGE, run.stderr
    assert run.stderr.startswith(NO_NUMPY)
    assert "NumPy not installed" in section("Exit status")


def test_without_the_checker_the_command_names_its_install():
    """The runtime ships no checker: without the distribution dlbridge-check, the main job's
    command says which one to install (tests/test_distribution.py follows that way out)."""
    code = ("import sys; sys.modules['dlbridge_check'] = None\n"
            "from dlbridge.__main__ import main; sys.exit(main(['check']))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == report.EXIT_USAGE, run.stderr
    install = (f"pip install dlbridge-check=={dlbridge.__version__} (in a checkout of dlbridge's "
               "sources: pip install ./checker)")
    assert run.stderr == (
        "python -m dlbridge check runs the conformance checker, which is not installed: "
        f"{install}\n"
    )
    assert "dlbridge-check" in section("Exit status")


def test_glossary_statuses_are_the_report_legend():
    rows = {}
    for line in section("Glossary").splitlines():
        m = re.match(r"^\| `(\w+)` \| (.*) \|$", line)
        if m:
            rows[m.group(1)] = m.group(2)
    assert list(rows) == report.STATUSES
    assert rows == report.STATUS_MEANINGS


def test_glossary_defines_the_report_words():
    words = {c for c in first_cells(section("Glossary"))}
    assert {"finding", "refusal", "listed rule", "rescue", "route", "case"} <= words


def test_html_report_has_the_legend():
    doc, producers, consumers = run_check(["numpy"], ["readonly/contiguous"], jobs=1)
    page = report.html_page(doc, doc["results"], doc["summary"], producers, consumers)
    assert "id=legend" in page
    for status, meaning in report.STATUS_MEANINGS.items():
        assert f">{status}</span></td><td>{report._e(meaning)}</td>" in page


def test_library_table_is_the_checker_list():
    rows = {}
    for line in section("Libraries").splitlines():
        m = re.match(r"^\| `([^`]+)` \| (.*?) \| (.*?) \|$", line)
        if m:
            rows[m.group(1)] = (m.group(2).strip("`"), m.group(3))
    actual = {}
    for cls in ALL_LIBRARIES:
        roles = ", ".join(r for r, on in (("producer", cls.producer), ("consumer", cls.consumer))
                          if on)
        actual[cls.name] = ("(built in)" if cls.builtin else cls.pip, roles)
    assert rows == actual


def _libraries_arguments() -> list[tuple[str, str]]:
    """(page, name) for every library named after --libraries or --fail-on in the docs."""
    found = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        # what a reader would type: the command lines of fenced blocks and the inline spans
        fenced = re.findall(r"^```.*?^```", text, re.S | re.M)
        prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
        commands = [line for block in fenced for line in block.splitlines()
                    if "python -m" in line or line.lstrip().startswith("--")]
        code = "\n".join(commands + re.findall(r"`([^`\n]+)`", prose))
        for value in re.findall(r"--(?:libraries|fail-on|dlbridge-peers|dlbridge-check)[ =]"
                                r"([\w.:,-]*\w)", code):
            found += [(page.name, name) for name in value.split(",") if name]
    return found


def test_every_library_the_docs_name_is_one_the_checker_takes():
    names = _libraries_arguments()
    assert len(names) > 20
    builtin = {cls.name for cls in ALL_LIBRARIES}
    wrong = [(page, n) for page, n in names
             if n not in builtin and n not in EXAMPLE_NAMES and n not in {"NAME", "LIB"}]
    assert wrong == []
    assert use_names(sorted(builtin)) == sorted(builtin)
