"""The support matrix page, from a JSON report of the main job (python -m dlbridge check):

    python scripts/support_matrix.py REPORT.json   # writes docs/support-matrix.json and .md
    python scripts/support_matrix.py                # rewrites the page from that snapshot

docs/support-matrix.json is the part of the report the page needs (the run, the libraries with
their versions, and per producer x consumer the status counts and bad cases of both routes); the
page is made from it alone, so tests/test_support_matrix.py can check that the committed page is
what the snapshot gives, and that the snapshot names the checker's libraries and cases of today.
Runs without dlbridge: the case links follow dlbridge_check.catalog.case_anchor's rule."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SNAPSHOT = REPO / "docs" / "support-matrix.json"
PAGE = REPO / "docs" / "support-matrix.md"
BAD = ("fail", "error", "crash", "timeout")
ROUTES = ("direct", "dlbridge")


def snapshot(report: dict) -> dict:
    """What the page needs of a full JSON report."""
    bad: dict[tuple[str, str, str], set[str]] = {}
    for r in report["results"]:
        if r["status"] in BAD:
            bad.setdefault((r["producer"], r["consumer"], r["route"]), set()).add(r["case"])
    pairs = []
    for p in report["summary"]["pairs"]:
        row = {"producer": p["producer"], "consumer": p["consumer"]}
        for route in ROUTES:
            row[route] = p[route]
            row[f"{route}_bad_cases"] = sorted(bad.get((p["producer"], p["consumer"], route), ()))
        pairs.append(row)
    return {
        "dlbridge_version": report["dlbridge_version"],
        "interpreter": report["interpreter"],
        "platform": report["platform"],
        "cases": report["cases"],
        "case_ids": sorted({r["case"] for r in report["results"]}),
        "libraries": report["libraries"],
        "dlbridge_failures": report["summary"]["dlbridge_failures"],
        "not_installed": report["not_installed"],
        "pairs": pairs,
    }


def _anchor(case_id: str) -> str:
    return "case-" + re.sub(r"[^A-Za-z0-9]+", "-", case_id).strip("-")


def _cell(counts: dict[str, int]) -> str:
    bad = sum(counts.get(s, 0) for s in BAD)
    ran = sum(counts.values()) - counts.get("unsupported", 0)
    if not ran:
        return "–"
    return f"{ran - bad}/{ran}" if bad else f"✓ {ran}"


def _cases_table(snap: dict) -> list[str]:
    """One row per case that does not work for some pair: how many pairs, on each route."""
    pairs: dict[str, dict[str, list[str]]] = {}
    for pair in snap["pairs"]:
        for route in ROUTES:
            for case in pair[f"{route}_bad_cases"]:
                pairs.setdefault(case, {r: [] for r in ROUTES})[route].append(
                    f"{pair['producer']} → {pair['consumer']}")

    def who(names: list[str]) -> str:
        if len(names) > 3:
            return f"{len(names)} pairs"
        return ", ".join(names) or "none"

    rows = [
        "| case | pairs where it does not work directly | through dlbridge |",
        "|---|---|---|",
    ]
    for case in sorted(pairs):
        rows.append(f"| [`{case}`](cases.md#{_anchor(case)}) | {who(pairs[case]['direct'])} | "
                    f"{who(pairs[case]['dlbridge'])} |")
    return rows


def page(snap: dict) -> str:
    """The Markdown page of a snapshot."""
    producers = list(dict.fromkeys(p["producer"] for p in snap["pairs"]))
    consumers = list(dict.fromkeys(p["consumer"] for p in snap["pairs"]))
    by_pair = {(p["producer"], p["consumer"]): p for p in snap["pairs"]}
    # an entry is a name, then the reason it cannot be used here (which can be long)
    absent = ", ".join(f"`{entry.split()[0]}`" for entry in snap["not_installed"])
    out = [
        "# Support matrix",
        "",
        "Which array libraries exchange arrays correctly with which, as the main job (the",
        "[conformance checker](checker.md), `python -m dlbridge check`) found them on the test",
        f"machine: dlbridge {snap['dlbridge_version']}, {snap['interpreter']},",
        f"{snap['platform']}, {snap['cases']} cases.",
        "`python scripts/support_matrix.py REPORT.json` regenerates this page from the JSON",
        "report of a run; the tests fail when the page is stale. Who is to blame for each case",
        "that does not work, and the way out, is in the checker's report of your own run.",
        "",
        "## Versions tested",
        "",
        "| library | version |",
        "|---|---|",
        *(f"| `{name}` | {version} |" for name, version in snap["libraries"].items()),
        "",
        f"Not installed or not usable on the test machine, so not in the tables: {absent}."
        if absent
        else "Every library the checker knows was installed on the test machine.",
        "",
    ]
    for route, title, how in (
        ("direct", "Directly", "`consumer.from_dlpack(x)`, the two libraries on their own"),
        ("dlbridge", "Through dlbridge", "`consumer.from_dlpack(dlbridge.from_dlpack(x))`"),
    ):
        out += [
            f"## {title}",
            "",
            f"{how}.",
            "Rows produce, columns consume. A cell counts the cases that work out of those that",
            "ran (`✓ N`: all N), leaving out the `unsupported` ones (refusals the specifications",
            "allow); `–`: no case applies to the pair.",
            "",
            "| producer \\ consumer | " + " | ".join(f"`{c}`" for c in consumers) + " |",
            "|---|" + "---|" * len(consumers),
        ]
        for p in producers:
            cells = [_cell(by_pair[(p, c)][route]) if (p, c) in by_pair else "" for c in consumers]
            out.append(f"| `{p}` | " + " | ".join(cells) + " |")
        out.append("")
    out += [
        "## The cases that do not always work",
        "",
        "Each case links to its description in the [case catalog](cases.md), with the",
        "real-world reports behind it. A case that fails through dlbridge is a finding against",
        "one of the two libraries (a consumer that ignores the read-only flag, say), unless the",
        f"checker blames dlbridge: it did for {snap['dlbridge_failures']} results of this run.",
        "",
        *_cases_table(snap),
        "",
    ]
    return "\n".join(out)


def _dump(snap: dict) -> str:
    """The snapshot as JSON with one pair a line: small, and its diffs readable."""
    head = {k: v for k, v in snap.items() if k != "pairs"}
    lines = json.dumps(head, indent=1)[:-2] + ',\n "pairs": [\n'
    lines += ",\n".join("  " + json.dumps(p, ensure_ascii=False) for p in snap["pairs"])
    return lines + "\n ]\n}\n"


def main(argv: list[str]) -> int:
    if argv:
        report = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
        SNAPSHOT.write_text(_dump(snapshot(report)), encoding="utf-8")
    PAGE.write_text(page(json.loads(SNAPSHOT.read_text(encoding="utf-8"))), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
