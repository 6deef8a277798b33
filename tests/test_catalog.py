"""dlbridge's catalog of real-world cases (``dlbridge_check.catalog``): complete, pointing at tests
that exist, and the committed ``docs/cases.md`` is exactly what the renderer writes."""

from __future__ import annotations

import re
from pathlib import Path

from dlb_testing import run_checker
from dlbridge_check import catalog
from dlbridge_check.cases import CASES, NOT_COVERED

ROOT = Path(__file__).resolve().parents[1]


def test_committed_page_is_the_rendered_catalog():
    page = (ROOT / "docs" / "cases.md").read_text(encoding="utf-8")
    assert page == catalog.markdown(), (
        "docs/cases.md is stale: run python -m dlbridge check --catalog > docs/cases.md"
    )


def test_cli_prints_the_catalog(tmp_path):
    out = run_checker(tmp_path, "--catalog", timeout=120).proc
    assert out.stdout == catalog.markdown()


def test_entries_are_numbered_in_order():
    assert [e.id for e in catalog.ENTRIES] == [f"C{i}" for i in range(1, len(catalog.ENTRIES) + 1)]


def test_every_id_the_checker_uses_has_an_entry():
    used = {r for c in CASES for r in c.refs} | set(NOT_COVERED)
    used |= {f"C{n}" for c in CASES for n in re.findall(r"\bC(\d+)\b", c.refuse or "")}
    assert used <= set(catalog.BY_C), sorted(used - set(catalog.BY_C))


def test_every_entry_is_complete():
    for e in catalog.ENTRIES:
        assert e.input and e.problem and e.dlbridge, e.id
        assert e.reports, e.id
        for url in e.reports:
            assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+", url), (
                e.id,
                url,
            )
        # a case is either covered by a test here or says what it needs that this machine lacks
        assert e.tests or e.needs, e.id


def test_every_test_reference_names_a_test_that_exists():
    for e in catalog.ENTRIES:
        for ref in e.tests:
            path, name = ref.split("::")
            file = ROOT / path
            assert file.is_file(), (e.id, ref)
            assert re.search(
                rf"^\s*(?:async\s+)?(?:def|fn)\s+{re.escape(name)}\b",
                file.read_text(encoding="utf-8"),
                re.M,
            ), (e.id, ref)


def test_anchors():
    assert catalog.case_anchor("dtype/bool") == "case-dtype-bool"
    assert catalog.case_anchor("layout/neg_cols") == "case-layout-neg-cols"
    page = catalog.markdown()
    for e in catalog.ENTRIES:
        assert f'<a id="{e.id}"></a>' in page
    for c in CASES:
        assert f'<a id="{catalog.case_anchor(c.id)}"></a>' in page, c.id
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', page))
    assert len(anchors) == len(catalog.ENTRIES) + len(CASES) + 1  # + the checker-cases heading
    for target in re.findall(r"\]\(#([^)]+)\)", page):
        assert target in anchors, target


def test_checker_cases_are_listed_under_their_entries():
    assert catalog.checker_cases("C1") == ["layout/neg_cols", "layout/neg_rows", "copy/false_neg"]
    assert "[`dtype/bool`](#case-dtype-bool)" in catalog.markdown()


def test_user_facing_text_names_no_outside_files_or_tracker_numbers():
    texts = [catalog.markdown(), catalog.html_section(), *NOT_COVERED.values()]
    texts += [c.title for c in CASES] + [c.refuse or "" for c in CASES]
    for t in texts:
        assert "CASES.md" not in t and "DECISIONS" not in t and "/work/" not in t, t[:200]
        assert not re.search(r"\bissue \d+", t), t[:200]


def test_html_links_to_entries_and_cases():
    assert catalog.link_refs("see C13 and C99, not XC1") == (
        f"see {catalog.entry_link('C13')} and C99, not XC1"
    )
    assert catalog.entry_link("C13").startswith('<a href="#C13" title="')
    assert (
        catalog.case_link("dtype/bool") == '<a href="#case-dtype-bool"><code>dtype/bool</code></a>'
    )
    assert catalog.case_link("no/such") == "no/such"
    section = catalog.html_section()
    for e in catalog.ENTRIES:
        assert f'id="{e.id}"' in section
    for c in CASES:
        assert f'id="{catalog.case_anchor(c.id)}"' in section
    for url in (u for e in catalog.ENTRIES for u in e.reports):
        assert f'href="{url}"' in section


def test_json_entries():
    got = catalog.for_json(["C31", "C2", "C2", "C999"])
    assert list(got) == ["C2", "C31"]
    assert got["C31"]["reports"] == list(catalog.BY_C["C31"].reports)
    assert got["C31"]["needs"] and got["C2"]["dlbridge"] and "tests" not in got["C2"]


def test_the_entries_are_data():
    """The entries live in catalog.json (one object each, Entry's fields), not in code."""
    import dataclasses
    import json
    from pathlib import Path

    here = Path(catalog.__file__).parent
    entries = json.loads((here / "catalog.json").read_text(encoding="utf-8"))
    fields = {f.name for f in dataclasses.fields(catalog.Entry)}
    required = {"id", "input", "problem", "reports", "dlbridge"}
    for e in entries:
        assert required <= set(e) <= fields, e.get("id")
        assert all(isinstance(v, str) for v in (e["input"], e["problem"], e["dlbridge"]))
        assert all(isinstance(u, str) for u in (*e["reports"], *e.get("tests", ())))
    assert [e["id"] for e in entries] == [e.id for e in catalog.ENTRIES]
    assert '"C1"' not in (here / "catalog.py").read_text()
