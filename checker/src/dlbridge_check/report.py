"""Outputs of the checker: the terminal summary, the JSON document and a self-contained HTML
page."""

from __future__ import annotations

import html
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from . import catalog
from .cases import BY_ID, FEATURES, NOT_COVERED

#: The version of the JSON report's layout (``schema_version``; report.schema.json describes it):
#: raised when a field is removed, renamed or changes its meaning.
SCHEMA_VERSION = 1
#: The exit statuses of ``python -m dlbridge check``: dlbridge itself failed a case; a usage
#: error; a library named by ``--fail-on`` has findings against it (dlbridge failed none).
EXIT_DLBRIDGE, EXIT_USAGE, EXIT_FAIL_ON = 1, 2, 3

#: Where a finding caused by a known release of a peer library is named, with its fix.
DOCTOR_HINT = (
    "python -m dlbridge doctor names the known problems of the releases installed here, "
    "with their fixes."
)

STATUSES = ["pass", "fail", "error", "crash", "timeout", "unsupported"]
# where every "please report it" sends the reader: the page that says what to attach
REPORT_IT = ('please report it (what to attach: "Reporting a bug" on the Troubleshooting page '
             "of dlbridge's documentation)")
#: What each status means: the legend of the HTML report, and the glossary of the checker's
#: documentation page (a test keeps the page's table equal to this).
STATUS_MEANINGS = {
    "pass": "the exchange did what the specifications ask: the right values, dtype, shape, device "
            "and read-only state, or the exception they name (BufferError where a copy or a "
            "device is needed but not allowed)",
    "fail": "the exchange gave a wrong answer: wrong values, a writable alias of read-only "
            "memory, a copy where copy=False forbade one (or none where copy=True asked for "
            "one), a capsule left unconsumed or freed twice",
    "error": "an exception of the wrong kind: a library raised where the exchange should work, "
             "or raised another type than the one the specifications name (RuntimeError or "
             "ValueError where BufferError is due)",
    "crash": "the worker process died during the case (a segmentation fault, an abort): the "
             "case's result, not the end of the run",
    "timeout": "the case took longer than --timeout seconds: a hang, or a machine too busy (the "
               "worker is killed and replaced)",
    "unsupported": "a refusal the specifications allow (a BufferError for data a library cannot "
                   "hold), or a case that does not apply (a dtype the producer lacks, a keyword a "
                   "consumer does not take)",
}
BAD = {"fail", "error", "crash", "timeout"}
SEVERITY = {"crash": 5, "fail": 4, "timeout": 3, "error": 2, "unsupported": 1, "pass": 0}
ROUTES = ["direct", "dlbridge"]
ROUTE_TITLES = {
    "direct": "consumer.from_dlpack(x)",
    "dlbridge": "consumer.from_dlpack(dlbridge.from_dlpack(x))",
}
COLORS = {
    "pass": "#2e9e4f",
    "unsupported": "#b8bec6",
    "error": "#f0a030",
    "timeout": "#a0522d",
    "fail": "#d93a3a",
    "crash": "#6b1f7a",
    "none": "#f4f5f7",
}

#: plain-words workaround per kind of finding
WORKAROUNDS = {
    "readonly": "pass copy=True when the source is read-only (or import with a consumer that keeps "
                "read-only arrays, e.g. NumPy)",
    "exception": "catch the exception it really raises (not only BufferError), or make a "
                 "contiguous copy first "
    '(np.ascontiguousarray / tensor.contiguous()); for data on another device pass device="cpu"',
    "crash": "do not hand this layout to this consumer: make a C-contiguous copy first "
    "(np.ascontiguousarray / tensor.contiguous())",
    "timeout": "avoid this exchange (it hangs); make a C-contiguous host copy first",
    "dtype": "convert to a dtype both sides support before the exchange (e.g. .astype / .to)",
    "values": "make a C-contiguous copy before the exchange; do not trust the imported values",
    "shape": "make a C-contiguous copy before the exchange",
    "copy": "do not rely on copy= being honoured for this pair; compare "
            "data pointers if aliasing matters",
    "accepted": "check the input yourself (layout, device, flags) before calling from_dlpack",
    "spec": "the exported capsule breaks the DLPack spec; import through "
            "a consumer that validates it "
    "(dlbridge.from_dlpack) or make a copy first",
    "deleter": "memory is leaked or freed twice: avoid this exchange in long-running code",
    "consumed": "never hand the same capsule to from_dlpack twice",
    "device": "pass device= explicitly and check where the result lives",
    "device_claim": "its memory is not where it says: ask for it where it is (from_dlpack(x, "
                    'device="cpu") for host memory it calls GPU memory), or move it with its own '
                    "library first",
    "strides": "make a C-contiguous copy before the exchange",
    "warning": "expect a warning on every import; copy first to avoid it",
    "reduce": "make a C-contiguous copy before reducing",
    "layout": "check is_c_contiguous yourself",
    "refused": f"this is a dlbridge bug: {REPORT_IT} (workaround: "
               "import with the consumer directly)",
    "export": f"this is a dlbridge bug: {REPORT_IT}",
    "buffer": "use DLPack (from_dlpack) instead of the buffer protocol for this dtype",
    "alignment": "copy misaligned data before the exchange",
    "import": "the two libraries cannot be imported into one process here",
    "peers_can": "register the dtype with numpy.dtypes.register_dlpack_dtype yourself (what "
                 "the package defining it could do at import)",
    "copy_false": "pass copy=None (or True) so that the producer may copy, or catch the "
                  "exception it really raises (not only BufferError)",
    "must_accept": "the input is valid: for an array without elements, make an empty one with "
                   "the consumer itself instead of importing it",
    "scalar": "convert the scalar with np.asarray first (a 0-d array)",
    "retry": "ask with max_version first; a producer that drops legacy capsules must refuse "
             "them with BufferError",
    "stream": "let the consumer pass stream=None (the producer then orders its own work)",
}


def _workaround(kind: str, rs: list[dict]) -> str:
    text = " ".join(r["detail"] for r in rs[:5]).lower()
    if kind == "exception":
        if "consumed" in text:
            return WORKAROUNDS["consumed"]
        if "device" in text:
            return ('pass device="cpu" so that the producer copies to the host, and catch the '
                    "exception it really raises")
        if "stride" in text:
            return "make a C-contiguous copy first (np.ascontiguousarray / tensor.contiguous())"
        if "dtype" in text or "type code" in text or "type " in text:
            return ("convert to a dtype both sides support first; catch the exception it really "
                    "raises (not only BufferError)")
        if "legacy" in text or "read-only" in text or "immutable" in text:
            return "ask for a versioned capsule (max_version=(1, 0)) or pass copy=True"
        return "catch the exception it really raises (not only BufferError)"
    return WORKAROUNDS.get(kind, "")


def _who(r: dict) -> str:
    f = r.get("fault")
    if f == "dlbridge":
        return "dlbridge"
    if f == "consumer":
        return r["consumer"]
    if f == "producer":
        return r["producer"]
    if f == "checker":
        return "the checker"
    return f"{r['producer']} → {r['consumer']}"


def dlbridge_failures(results: list[dict]) -> list[dict]:
    return [r for r in results if r.get("fault") == "dlbridge" and r["status"] in BAD]


def _counts(rs) -> dict[str, int]:
    c = Counter(r["status"] for r in rs)
    return {s: c.get(s, 0) for s in STATUSES}


def against(r: dict) -> list[tuple[str, str]]:
    """The libraries a result is a finding against, each with its role: the producer or the
    consumer at fault, or both when the fault is the pair's."""
    if r["status"] not in BAD:
        return []
    fault = r.get("fault")
    roles = ["producer", "consumer"] if fault == "peers" else [fault]
    return [(r[role], role) for role in roles if role in ("producer", "consumer")]


def group_findings(
    results: list[dict], keep: Callable[[dict], bool] | None = None
) -> list[dict]:
    """Bad results (those ``keep`` takes, default all) grouped by (route, who, kind), worst
    first."""
    twins = {(r["producer"], r["consumer"], r["case"], r["route"]): r for r in results}
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in results:
        if r["status"] not in BAD or (keep is not None and not keep(r)):
            continue
        kind = r.get("check") or r["status"]
        if r["status"] in ("crash", "timeout"):
            kind = r["status"]
        sig = re.sub(r"0x[0-9a-f]+|\b\d+(\.\d+)?\b", "#", r["detail"].split(";")[0])
        sig = re.sub(r"^\S+ → \S+", "", sig)[:70]
        if kind == "readonly":
            sig = ""
        groups[
            (
                r.get("fault") == "dlbridge",
                _who(r),
                kind,
                r["route"] if r.get("fault") != "dlbridge" else "dlbridge",
                sig,
            )
        ].append(r)
    out = []
    for (is_dlb, who, kind, route, _sig), rs in groups.items():
        worst = max(rs, key=lambda r: SEVERITY[r["status"]])
        rescued = 0
        if route == "direct":
            for r in rs:
                twin = twins.get((r["producer"], r["consumer"], r["case"], "dlbridge"))
                if twin and twin["status"] == "pass":
                    rescued += 1
        cases = sorted({r["case"] for r in rs})
        pairs = sorted({f"{r['producer']}→{r['consumer']}" for r in rs})
        # the catalog entries the finding is about: named in the details, or the cases' own rows
        # when the finding is confined to a few cases
        named = {m for r in rs for m in re.findall(r"\bC(\d{1,2})\b", r["detail"])}
        refs_set = {f"C{n}" for n in named}
        if len(cases) <= 3:
            refs_set |= {x for r in rs for x in (r.get("refs") or [])}
        refs = sorted(refs_set, key=lambda s: int(s[1:]))
        work = _workaround(kind, rs)
        if is_dlb:
            work = "a dlbridge bug: " + (
                REPORT_IT
                if not work.startswith("this is")
                else work[len("this is a dlbridge bug: ") :]
            )
        if rescued:
            work = (
                f"going through dlbridge works in {rescued} of these {len(rs)} cases: "
                "consumer.from_dlpack(dlbridge.from_dlpack(x))"
                + ("; otherwise " + work if work else "")
            )
        out.append(
            {
                "dlbridge": is_dlb,
                "who": who,
                "kind": kind,
                "route": route,
                "status": worst["status"],
                "count": len(rs),
                "cases": cases,
                "pairs": pairs,
                "refs": refs,
                "example": f"{worst['producer']} → {worst['consumer']}, {worst['case']} "
                           f"({worst['route']}): {worst['detail']}",
                "workaround": work,
            }
        )
    out.sort(key=lambda g: (not g["dlbridge"], -SEVERITY[g["status"]], -g["count"]))
    return out


def _reason(detail: str) -> str:
    """A detail reduced to its reason (no addresses, numbers or trailing exception text)."""
    head = detail.split(" (BufferError")[0].split(": BufferError")[0]
    return re.sub(r"0x[0-9a-f]+|\b\d{3,}\b", "#", head)[:240]


#: The only refusals dlbridge may make where the direct exchange passes: each names the rule
#: that the direct result breaks, and is recognised by its reason. dlbridge is never stricter
#: than a direct exchange otherwise, so any other such refusal is dlbridge's own failure.
LISTED_REFUSALS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"DLPack 1\.1|float8|float6|float4"),
        "float8, float6 and float4 codes exist from DLPack 1.1 on: an older capsule cannot "
        "carry them, and a consumer that takes one anyway reads another dtype (C26)",
    ),
)


def listed_rule(reason: str) -> str | None:
    """The rule a refusal with this reason stands on, or None for an unlisted refusal."""
    for pattern, rule in LISTED_REFUSALS:
        if pattern.search(reason):
            return rule
    return None


def dlbridge_refusals(results: list[dict]) -> list[dict]:
    """Refusals where the direct exchange passes: the dlbridge route says "unsupported" where
    the direct one passes, grouped by reason, each with the rule it stands on (None: unlisted,
    a failure of dlbridge's)."""
    twins = {(r["producer"], r["consumer"], r["case"], r["route"]): r for r in results}
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        if r["route"] != "dlbridge" or r["status"] != "unsupported":
            continue
        d = twins.get((r["producer"], r["consumer"], r["case"], "direct"))
        if d is not None and d["status"] == "pass":
            groups[_reason(r["detail"])].append(r)
    out: list[dict[str, Any]] = [
        {
            "reason": reason,
            "rule": listed_rule(reason),
            "count": len(rs),
            "pairs": sorted({f"{r['producer']}→{r['consumer']}" for r in rs}),
            "cases": sorted({r["case"] for r in rs}),
        }
        for reason, rs in groups.items()
    ]
    out.sort(key=lambda g: (g["rule"] is not None, -g["count"]))
    return out


def dlbridge_rescues(results: list[dict]) -> list[dict]:
    """Exchanges that pass through dlbridge but fail, crash or are refused directly."""
    twins = {(r["producer"], r["consumer"], r["case"], r["route"]): r for r in results}
    pairs: dict[tuple, Counter] = defaultdict(Counter)
    for r in results:
        if r["route"] != "dlbridge" or r["status"] != "pass":
            continue
        d = twins.get((r["producer"], r["consumer"], r["case"], "direct"))
        if d is None or d["status"] == "pass":
            continue
        if d["status"] == "unsupported" and "cannot express this case" in d["detail"]:
            continue
        pairs[(r["producer"], r["consumer"])][d["status"]] += 1
    out = [
        {"producer": p, "consumer": c, "count": sum(n.values()), "direct": dict(n)}
        for (p, c), n in pairs.items()
    ]
    out.sort(key=lambda g: -g["count"])
    return out


def consumer_versions(results: list[dict]) -> dict[str, str]:
    """The capsule version each consumer asks for (from the capsule/versioned case)."""
    out = {}
    for r in results:
        if r["case"] != "capsule/versioned" or r["route"] != "direct" or r["consumer"] in out:
            continue
        m = re.search(r"asked max_version=(\(\d+, \d+\)|None)", r["detail"])
        if m:
            out[r["consumer"]] = (
                "legacy capsules only" if m.group(1) == "None" else f"max_version={m.group(1)}"
            )
    return out


def coverage(results: list[dict], selected: set[str] | None = None) -> dict:
    """Catalog entries exercised (a result other than "unsupported") and why the others are not."""
    selected_refs = None
    if selected is not None:
        selected_refs = {ref for cid in selected if cid in BY_ID for ref in BY_ID[cid].refs}
    covered: Counter[str] = Counter()
    for r in results:
        if r["status"] != "unsupported":
            for ref in r.get("refs") or []:
                covered[ref] += 1
    not_covered = {}
    for c in (e.id for e in catalog.ENTRIES):
        if c not in covered:
            if c in NOT_COVERED:
                not_covered[c] = NOT_COVERED[c]
            elif selected_refs is not None and c not in selected_refs:
                not_covered[c] = "not in the selected cases"
            else:
                not_covered[c] = "no installed library can express it here"
    return {"covered": sorted(covered, key=lambda s: int(s[1:])), "not_covered": not_covered}


def by_library(results: list[dict], names: list[str]) -> dict[str, dict[str, int]]:
    """How many results are findings against each library, as producer and as consumer."""
    out = {n: {"producer": 0, "consumer": 0} for n in names}
    for r in results:
        for name, role in against(r):
            out.setdefault(name, {"producer": 0, "consumer": 0})[role] += 1
    return out


def summarize(
    results: list[dict],
    libraries: dict,
    duration: float,
    producers: list[str],
    consumers: list[str],
    selected: set[str] | None = None,
    fail_on: list[str] | None = None,
) -> dict:
    by_route = {route: _counts([r for r in results if r["route"] == route]) for route in ROUTES}
    pairs = []
    bucket: dict[tuple, list] = defaultdict(list)
    for r in results:
        bucket[(r["producer"], r["consumer"], r["route"])].append(r)
    for p in producers:
        for c in consumers:
            if (p, c, "direct") in bucket or (p, c, "dlbridge") in bucket:
                pairs.append(
                    {
                        "producer": p,
                        "consumer": c,
                        "direct": _counts(bucket.get((p, c, "direct"), [])),
                        "dlbridge": _counts(bucket.get((p, c, "dlbridge"), [])),
                        "dlbridge_failures": len(
                            dlbridge_failures(
                                bucket.get((p, c, "dlbridge"), [])
                                + bucket.get((p, c, "direct"), [])
                            )
                        ),
                    }
                )
    fails = dlbridge_failures(results)
    refusals = dlbridge_refusals(results)
    unlisted = sum(g["count"] for g in refusals if g["rule"] is None)
    counts = by_library(results, list(dict.fromkeys(producers + consumers)))
    red = [n for n in fail_on or [] if sum(counts.get(n, {}).values())]
    exit_status = EXIT_DLBRIDGE if fails or unlisted else EXIT_FAIL_ON if red else 0
    return {
        "results": len(results),
        "by_route": by_route,
        "pairs": pairs,
        "dlbridge_failures": len(fails),
        "dlbridge_failure_cases": sorted({r["case"] for r in fails}),
        "findings": group_findings(results)[:40],
        "dlbridge_refusals": refusals,
        "unlisted_refusals": unlisted,
        "dlbridge_rescues": dlbridge_rescues(results),
        "consumer_versions": consumer_versions(results),
        "coverage": coverage(results, selected),
        "by_library": counts,
        "fail_on": list(fail_on or []),
        "duration_seconds": round(duration, 1),
        "exit_status": exit_status,
    }


def document(meta: dict, results: list[dict], summary: dict) -> dict:
    """The JSON document: metadata, every result, the summary and the catalog entries (C1 ...)
    that the results' ``refs`` and the coverage name."""
    named = [ref for r in results for ref in r.get("refs") or []]
    named += list(summary["coverage"]["not_covered"])
    return {
        "schema_version": SCHEMA_VERSION,
        **meta,
        "results": results,
        "summary": summary,
        "catalog": catalog.for_json(named),
    }


def json_schema() -> dict:
    """The JSON Schema of the ``--json`` report (``report.schema.json`` in this package)."""
    from importlib.resources import files

    return json.loads(files(__package__).joinpath("report.schema.json").read_text("utf-8"))


def write_json(path: str, doc: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, default=str)
        f.write("\n")


# ----------------------------------------------------------------------------- terminal


def _cell(counts: dict[str, int], marker: bool) -> str:
    if not any(counts.values()):
        return "-"
    p = counts["pass"]
    f = counts["fail"] + counts["error"]
    c = counts["crash"] + counts["timeout"]
    return f"{p}/{f}/{c}" + ("*" if marker else "")


def _wrap(text: str, width: int, indent: str) -> str:
    import textwrap

    return textwrap.fill(text, width=width, initial_indent=indent, subsequent_indent=indent)


def terminal(
    meta: dict,
    results: list[dict],
    summary: dict,
    producers: list[str],
    consumers: list[str],
    *,
    top: int = 12,
) -> str:
    """The text report: one section after the other."""
    return "\n".join(
        _t_header(meta, summary, producers, consumers)
        + _t_libraries(meta, results)
        + _t_matrices(summary, producers, consumers)
        + _t_findings(summary["findings"], top)
        + _t_rescues(summary.get("dlbridge_rescues") or [])
        + _t_refusals(summary.get("dlbridge_refusals") or [])
        + _t_verdict(results, summary)
        + _t_fail_on(summary)
        + _t_coverage(summary["coverage"]["not_covered"])
    )


def _t_header(meta: dict, summary: dict, producers: list[str], consumers: list[str]) -> list[str]:
    return [
        f"dlbridge {meta['dlbridge_version']} conformance check: Python {meta['python']}, "
        f"{len(producers)} producers x {len(consumers)} consumers, {meta['cases']} cases, "
        f"{summary['results']} results in {summary['duration_seconds']:.0f} s",
        "",
    ]


def _t_libraries(meta: dict, results: list[dict]) -> list[str]:
    """The libraries with their versions and roles, those missing or broken, and the capsule
    version each consumer asks for."""
    libs = meta["libraries_detail"]
    under = meta.get("interpreter", f"Python {meta['python']}")
    lines = [f"Libraries (each checked under {under}):"]
    for d in libs:
        if d["installed"]:
            roles = ", ".join(
                r for r, on in (("producer", d["producer"]), ("consumer", d["consumer"])) if on
            )
            lines.append(f"  {d['name']:<17} {d['version'] or '?':<18} {roles}")
    missing = meta.get("not_installed") or [d["name"] for d in libs if not d["installed"]]
    if missing:
        lines.append("  not installed: " + ", ".join(missing))
    broken: dict[str, str] = {}
    for r in results:
        if r.get("check") == "import" and r["detail"].startswith("could not load "):
            name = r["detail"][len("could not load "):].split(" ")[0]
            broken.setdefault(name, r["detail"].split(": ", 1)[-1])
    for name, err in broken.items():
        lines.append(
            _wrap(f"could not load {name}, its results are 'unsupported': {err}", 110, "  ")
        )
    asks = consumer_versions(results)
    if asks:
        lines.append(
            _wrap("consumers ask for: " + ", ".join(f"{c} {v}" for c, v in asks.items()), 110, "  ")
        )
    lines.append("")
    return lines


def _t_matrices(summary: dict, producers: list[str], consumers: list[str]) -> list[str]:
    """A pass/fail/crash matrix per route."""
    lines = []
    pair_map = {(p["producer"], p["consumer"]): p for p in summary["pairs"]}
    colw = max(9, max((len(c) for c in consumers), default=9) + 1)
    for route in ROUTES:
        lines.append(
            f"{'Direct' if route == 'direct' else 'Through dlbridge'}: {ROUTE_TITLES[route]}   "
            f"(cells: pass/fail/crash)"
        )
        corner = "producer \\ consumer"
        head = f"  {corner:<20}" + "".join(f"{c:>{colw}}" for c in consumers)
        lines.append(head)
        for p in producers:
            row = f"  {p:<20}"
            for c in consumers:
                pr = pair_map.get((p, c))
                if pr is None:
                    row += f"{'-':>{colw}}"
                    continue
                marker = route == "dlbridge" and pr["dlbridge_failures"] > 0
                row += f"{_cell(pr[route], marker):>{colw}}"
            lines.append(row)
        t = summary["by_route"][route]
        lines.append("  totals: " + ", ".join(f"{s} {t[s]}" for s in STATUSES))
        lines.append("")
    lines.append(
        "  fail = wrong result or wrong exception (fail+error); crash = crash+timeout; * = "
        "dlbridge itself failed there"
    )
    lines.append("")
    return lines


def _t_findings(findings: list[dict], top: int) -> list[str]:
    """The worst ``top`` kinds of finding, each with an example, its pairs and its way out."""
    if not findings:
        return []
    lines = ["Worst findings:"]
    for i, g in enumerate(findings[:top], 1):
        who = "dlbridge" if g["dlbridge"] else g["who"]
        refs = f" [{', '.join(g['refs'])}]" if g["refs"] else ""
        lines.append(
            f" {i:>2}. [{g['status']}] {who} ({g['kind']}, {g['count']} "
            f"result{'s' if g['count'] != 1 else ''}){refs}"
        )
        lines.append(_wrap(g["example"], 110, "      "))
        if len(g["pairs"]) > 1:
            lines.append(
                _wrap(
                    "pairs: "
                    + ", ".join(g["pairs"][:8])
                    + (" ..." if len(g["pairs"]) > 8 else ""),
                    110,
                    "      ",
                )
            )
        if g["workaround"]:
            lines.append(_wrap("workaround: " + g["workaround"], 110, "      "))
    if len(findings) > top:
        lines.append(
            f"  ... {len(findings) - top} more kinds of finding in the JSON / HTML report"
        )
    lines += [DOCTOR_HINT, ""]
    return lines


def _t_rescues(rescues: list[dict]) -> list[str]:
    """The exchanges that work only through dlbridge."""
    if not rescues:
        return []
    total = sum(g["count"] for g in rescues)
    return [
        f"Through dlbridge, {total} exchanges work that fail, crash or are refused directly:",
        _wrap(
            ", ".join(f"{g['producer']}→{g['consumer']} {g['count']}" for g in rescues[:14])
            + (" ..." if len(rescues) > 14 else ""),
            110,
            "  ",
        ),
        "",
    ]


def _t_refusals(refusals: list[dict]) -> list[str]:
    """Where dlbridge refuses an exchange that works directly, with the rule it stands on."""
    if not refusals:
        return []
    lines = ["Where dlbridge refuses but the direct exchange works:"]
    for g in refusals[:8]:
        why = (f"the direct result breaks a rule: {g['rule']}" if g.get("rule")
               else "UNLISTED: a failure of dlbridge's, which is never stricter than direct")
        lines.append(
            _wrap(
                f"- {g['count']}x {g['reason']} (e.g. {', '.join(g['pairs'][:4])}); {why}",
                110, "  ",
            )
        )
    lines.append("")
    return lines


def _t_verdict(results: list[dict], summary: dict) -> list[str]:
    """dlbridge's own failures and the exit status they give."""
    lines = []
    fails = dlbridge_failures(results)
    if fails:
        lines.append(
            f"dlbridge itself failed {len(fails)} result(s) in "
            f"{len(summary['dlbridge_failure_cases'])} case(s) -> exit status 1:"
        )
        seen = set()
        for r in fails:
            key = (
                r["case"],
                r.get("check"),
                re.sub(r"0x[0-9a-f]+|\d{6,}", "#", r["detail"])[:120],
                r["producer"],
            )
            if key in seen:
                continue
            seen.add(key)
            lines.append(
                _wrap(
                    f"- {r['producer']} -> {r['consumer']}, {r['case']}: [{r['status']}] "
                    f"{r['detail']}",
                    110,
                    "  ",
                )
            )
            if len(seen) >= 25:
                lines.append(f"  ... see the JSON report for all {len(fails)}")
                break
    elif not summary.get("unlisted_refusals"):
        end = " -> exit status 0" if summary["exit_status"] == 0 else ""
        lines.append(f"dlbridge itself failed no case{end}.")
    if summary.get("unlisted_refusals"):
        lines.append(
            f"dlbridge refused {summary['unlisted_refusals']} exchange(s) that work directly "
            "without a listed rule (above) -> exit status 1."
        )
    return lines


def _t_fail_on(summary: dict) -> list[str]:
    """The findings against the libraries named by --fail-on."""
    lines = []
    for name in summary.get("fail_on") or []:
        n = summary["by_library"].get(name, {"producer": 0, "consumer": 0})
        lines.append(
            f"--fail-on {name}: {n['producer'] + n['consumer']} finding(s) against it "
            f"({n['producer']} as producer, {n['consumer']} as consumer)"
        )
    if summary["exit_status"] == EXIT_FAIL_ON:
        lines.append(f"Findings against a --fail-on library -> exit status {EXIT_FAIL_ON}.")
    return lines


def _t_coverage(not_covered: dict[str, str]) -> list[str]:
    """The catalog entries no result exercised, and why."""
    if not not_covered:
        return []
    return [
        "",
        _wrap(
            "Catalog cases not exercised here (python -m dlbridge "
            "check --catalog describes each): "
            + "; ".join(f"{k} ({v})" for k, v in not_covered.items()),
            110,
            "",
        ),
    ]


# ----------------------------------------------------------------------------- HTML

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d2127;
max-width:1400px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;
padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
.meta{color:#555} table{border-collapse:collapse;margin:6px 0}
td,th{padding:3px 6px;border:1px solid #e1e4e8;vertical-align:top;text-align:left}
th{background:#f6f8fa;font-weight:600}
table.m td.c{padding:0;width:86px;height:30px;text-align:center}
table.m a{display:flex;height:30px;text-decoration:none;color:#fff;font-size:12px}
table.m a span{flex:1;display:flex;align-items:center;justify-content:center}
.legend span{display:inline-block;padding:1px 8px;margin-right:4px;border-radius:3px;color:#fff;
font-size:12px}
.st{display:inline-block;min-width:74px;text-align:center;border-radius:3px;color:#fff;
font-size:12px;padding:0 4px}
.det td{font-size:12.5px} .det td.d{max-width:560px;word-break:break-word}
.cellsec{margin:10px 0 22px;padding:6px 10px;border-left:4px solid #ccc}
.cellsec:target{border-left-color:#0366d6;background:#f1f8ff}
.find li{margin-bottom:8px} .small{font-size:12px;color:#555} .dlb{font-weight:600;color:#b00}
code{background:#f3f4f6;padding:0 3px;border-radius:3px}
.cat{margin:6px 0 14px;padding:2px 10px;border-left:4px solid #ddd}
.cat:target,tr:target{border-left-color:#0366d6;background:#f1f8ff}
.libsec{margin:10px 0 22px;padding:6px 10px;border-left:4px solid #ccc}
.libsec:target{border-left-color:#0366d6} h4{font-size:14px;margin:12px 0 4px}
"""


def _e(s: Any) -> str:
    return html.escape(str(s), quote=True)


def _slug(*parts: str) -> str:
    return "-".join(re.sub(r"[^A-Za-z0-9]+", "_", p) for p in parts)


def _worst(rs: list[dict]) -> str:
    if not rs:
        return "none"
    bad = [r for r in rs if r["status"] != "unsupported"]
    if not bad:
        return "unsupported"
    return max(bad, key=lambda r: SEVERITY[r["status"]])["status"]


def _half(rs: list[dict]) -> str:
    w = _worst(rs)
    n = Counter(r["status"] for r in rs)
    label = (
        f"{n.get('pass', 0)}"
        if w in ("pass", "none")
        else f"{sum(n[s] for s in BAD)}✗"
        if w in BAD
        else "–"
    )
    if w == "none":
        label = ""
    tip = ", ".join(f"{k} {v}" for k, v in sorted(n.items()))
    return f'<span style="background:{COLORS[w]}" title="{_e(tip)}">{_e(label)}</span>'


def _matrix(feature: str, results: list[dict], producers: list[str], consumers: list[str]) -> str:
    by = defaultdict(list)
    for r in results:
        by[(r["producer"], r["consumer"], r["route"])].append(r)
    out = [
        '<table class="m"><tr><th>producer \\ consumer</th>'
        + "".join(f"<th>{_e(c)}</th>" for c in consumers)
        + "</tr>"
    ]
    for p in producers:
        row = f"<tr><th>{_e(p)}</th>"
        for c in consumers:
            d, b = by.get((p, c, "direct"), []), by.get((p, c, "dlbridge"), [])
            if not d and not b:
                row += '<td class="c"></td>'
                continue
            row += f'<td class="c"><a href="#{_slug(feature, p, c)}">{_half(d)}{_half(b)}</a></td>'
        out.append(row + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _badge(status: str) -> str:
    return f'<span class="st" style="background:{COLORS[status]}">{_e(status)}</span>'


def html_page(
    meta: dict, results: list[dict], summary: dict, producers: list[str], consumers: list[str]
) -> str:
    """The self-contained HTML report: one section after the other."""
    by_feature: defaultdict[str, list[dict]] = defaultdict(list)
    for r in results:
        by_feature[r.get("feature") or BY_ID[r["case"]].feature].append(r)
    checked = list(dict.fromkeys(producers + consumers))
    parts = (
        _h_header(meta, summary, producers, consumers)
        + _h_libraries(meta["libraries_detail"], checked)
        + _h_dlbridge_failures(dlbridge_failures(results))
        + _h_findings(summary["findings"])
        + _h_rescues(summary.get("dlbridge_rescues") or [])
        + _h_refusals(summary.get("dlbridge_refusals") or [])
        + _h_matrices(results, by_feature, producers, consumers)
        + _h_cell_details(results, by_feature)
        + _h_coverage(summary["coverage"])
        + _h_each_library(meta, results, checked)
        + [catalog.html_section(), "</body></html>"]
    )
    return "\n".join(parts)


def _h_header(meta: dict, summary: dict, producers: list[str], consumers: list[str]) -> list[str]:
    return [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f"<title>dlbridge check: {len(producers)}×{len(consumers)} "
        f"libraries</title><style>{_CSS}</style></head><body>",
        f"<h1>dlbridge {_e(meta['dlbridge_version'])} conformance check</h1>",
        f"<div class=meta>{_e(meta.get('interpreter', 'Python ' + meta['python']))} · "
        f"{_e(meta.get('platform', ''))} · "
        f"{summary['results']} results · "
        f"{summary['duration_seconds']:.0f} s · exit status {summary['exit_status']}</div>",
        "<p class=legend>Each cell: <b>left half</b> = direct "
        "<code>consumer.from_dlpack(x)</code>, "
        "<b>right half</b> = through dlbridge "
        "<code>consumer.from_dlpack(dlbridge.from_dlpack(x))</code>; "
        "colour = the worst result in the cell; click a cell for its cases. "
        + "".join(
            f'<span style="background:{COLORS[s]}">{s}</span>'
            for s in ["pass", "unsupported", "error", "timeout", "fail", "crash"]
        )
        + "</p>",
        *_h_legend(),
    ]


def _h_legend() -> list[str]:
    """What each status means, and the words of the report, folded under the header."""
    rows = "".join(
        f'<tr><td><span style="background:{COLORS[s]}">{s}</span></td>'
        f"<td>{_e(STATUS_MEANINGS[s])}</td></tr>"
        for s in STATUSES
    )
    return [
        "<details class=legend id=legend><summary>Legend: what the statuses and words mean"
        f"</summary><table>{rows}</table><p>A <b>finding</b> is a result with a bad status "
        "(fail, error, crash, timeout), blamed on the producer, the consumer, the pair, dlbridge "
        "or the checker. A <b>refusal</b> is dlbridge raising BufferError where the direct "
        "exchange passes; it stands on a <b>listed rule</b> when the direct result breaks one of "
        "the few rules that allow it, and is dlbridge's failure otherwise. A <b>rescue</b> is an "
        "exchange that works only through dlbridge.</p></details>",
    ]


def _h_libraries(libraries_detail: list[dict], checked: list[str]) -> list[str]:
    """The libraries with their versions and roles; each checked one links to its section."""
    parts = [
        '<h2 id="libraries">Libraries</h2><table><tr><th>library</th><th>version</th>'
        "<th>roles</th><th>note</th></tr>"
    ]
    for d in libraries_detail:
        roles = ", ".join(
            r for r, on in (("producer", d["producer"]), ("consumer", d["consumer"])) if on
        )
        ver = d["version"] if d["installed"] else "not installed"
        name = _e(d["name"])
        if d["name"] in checked:
            name = f'<a href="#{_slug("lib", d["name"])}">{name}</a>'
        parts.append(
            f"<tr><td>{name}</td><td>{_e(ver)}</td><td>{_e(roles)}</td><td "
            f"class=small>{_e(d.get('note', ''))}</td></tr>"
        )
    parts.append("</table>")
    return parts


def _h_dlbridge_failures(fails: list[dict]) -> list[str]:
    parts = [f"<h2>dlbridge itself: {len(fails)} failing result(s)</h2>"]
    if not fails:
        return parts + ["<p>None: every failure below belongs to the peer libraries.</p>"]
    parts.append(
        "<table class=det><tr><th>case</th><th>pair</th><th>status</th><th>detail</th></tr>"
    )
    for r in fails[:300]:
        parts.append(
            f"<tr><td>{catalog.case_link(r['case'])}</td><td>{_e(r['producer'])} → "
            f"{_e(r['consumer'])}</td>"
            f"<td>{_badge(r['status'])}</td><td "
            f"class=d>{catalog.link_refs(_e(r['detail']))}</td></tr>"
        )
    parts.append("</table>")
    return parts


def _h_finding(g: dict) -> str:
    """One kind of finding as a list item: example, cases, pairs and the way out."""
    who = '<span class=dlb>dlbridge</span>' if g["dlbridge"] else _e(g["who"])
    return (
        f"<li>{_badge(g['status'])} {who} — {_e(g['kind'])}, {g['count']} result(s) "
        f"{' '.join(catalog.entry_link(x) for x in g['refs'])}<br>"
        f"{catalog.link_refs(_e(g['example']))}<br><span class=small>cases: "
        f"{', '.join(catalog.case_link(c) for c in g['cases'][:12])}"
        f" · pairs: {_e(', '.join(g['pairs'][:12]))}</span><br>"
        f"<span class=small><b>workaround:</b> "
        f"{catalog.link_refs(_e(g['workaround']))}</span></li>"
    )


def _h_findings(findings: list[dict]) -> list[str]:
    return ["<h2>Worst findings</h2><ol class=find>"] + [
        _h_finding(g) for g in findings[:25]
    ] + ["</ol>", f"<p class=small>{_e(DOCTOR_HINT)}</p>"]


def _h_rescues(rescues: list[dict]) -> list[str]:
    if not rescues:
        return []
    parts = [
        "<h2>What dlbridge makes work</h2><p>Exchanges that pass through dlbridge but fail, "
        "crash or are refused directly:</p><table><tr><th>producer → "
        "consumer</th><th>cases</th><th>direct results</th></tr>"
    ]
    for g in rescues:
        parts.append(
            f"<tr><td>{_e(g['producer'])} → {_e(g['consumer'])}</td><td>{g['count']}</td><td "
            f"class=small>{_e(', '.join(f'{k} {v}' for k, v in g['direct'].items()))}</td></tr>"
        )
    parts.append("</table>")
    return parts


def _h_refusals(refusals: list[dict]) -> list[str]:
    if not refusals:
        return []
    parts = [
        "<h2>Where dlbridge refuses but the direct exchange works</h2><table><tr>"
        "<th>results</th><th>reason</th><th>the rule the direct result breaks</th>"
        "<th>pairs</th></tr>"
    ]
    for g in refusals:
        rule = g.get("rule") or "none listed: a failure of dlbridge's"
        parts.append(
            f"<tr><td>{g['count']}</td><td>{catalog.link_refs(_e(g['reason']))}</td>"
            f"<td>{catalog.link_refs(_e(rule))}</td><td "
            f"class=small>{_e(', '.join(g['pairs']))}</td></tr>"
        )
    parts.append("</table>")
    return parts


def _h_matrices(
    results: list[dict], by_feature: dict[str, list[dict]], producers: list[str],
    consumers: list[str],
) -> list[str]:
    """One colour matrix for all features, then one per feature."""
    parts = ["<h2>All features</h2>", _matrix("all", results, producers, consumers)]
    for feat, title in FEATURES.items():
        rs = by_feature.get(feat)
        if not rs:
            continue
        parts.append(f"<h2>{_e(title)} <span class=small>({_e(feat)})</span></h2>")
        parts.append(_matrix(feat, rs, producers, consumers))
    return parts


def _h_cell_details(results: list[dict], by_feature: dict[str, list[dict]]) -> list[str]:
    """The cases of every matrix cell, the targets of the cells' links."""
    parts = ["<h2>Cell details</h2>"]
    for feat in ["all"] + list(FEATURES):
        rs = results if feat == "all" else by_feature.get(feat, [])
        cells: defaultdict[tuple[str, str], dict] = defaultdict(dict)
        for r in rs:
            cells[(r["producer"], r["consumer"])].setdefault(r["case"], {})[r["route"]] = r
        for (p, c), cases in cells.items():
            if feat == "all":
                # the "all" cells list only what is not a plain pass on both routes
                cases = {
                    k: v for k, v in cases.items() if any(x["status"] != "pass" for x in v.values())
                }
            parts.append(
                f'<div class=cellsec id="{_slug(feat, p, c)}"><h3>{_e(p)} → {_e(c)} · '
                f'{_e(FEATURES.get(feat, "all features (non-passing cases)"))}</h3>'
            )
            if not cases:
                parts.append("<p class=small>every case passes both routes</p></div>")
                continue
            parts.append(
                "<table class=det><tr><th>case</th><th>refs</th><th>direct</th><th>through "
                "dlbridge</th></tr>"
            )
            parts += [_h_case_row(cid, routes) for cid, routes in cases.items()]
            parts.append("</table></div>")
    return parts


def _h_case_row(cid: str, routes: dict[str, dict]) -> str:
    """A case of a cell: its title, its catalog entries and its result on each route."""
    case = BY_ID.get(cid)
    cells_html = []
    for route in ROUTES:
        r = routes.get(route)
        if r is None:
            cells_html.append("<td></td>")
        else:
            fault = (
                f" <span class=small>(fault: {_e(r['fault'])})</span>"
                if r.get("fault") and r["status"] in BAD
                else ""
            )
            cells_html.append(
                f"<td class=d>{_badge(r['status'])}{fault} "
                f"{catalog.link_refs(_e(r['detail']))}</td>"
            )
    title = (f"<b>{catalog.case_link(cid)}</b><br>"
             f"<span class=small>{_e(case.title if case else '')}</span>")
    refs = " ".join(
        catalog.entry_link(x) for x in routes[next(iter(routes))].get("refs") or []
    )
    return f"<tr><td>{title}</td><td>{refs}</td>{''.join(cells_html)}</tr>"


def _h_coverage(coverage: dict) -> list[str]:
    """The catalog entries the results exercise, and why the others are not."""
    nc = coverage["not_covered"]
    parts = [
        '<h2>Catalog coverage</h2><p class=small>Which <a href="#catalog">catalog</a> cases the '
        'results exercise.</p>',
        f"<p>Exercised: "
        f"{' '.join(catalog.entry_link(x) for x in coverage['covered'])}</p>",
    ]
    if nc:
        parts.append(
            "<table><tr><th>case</th><th>why not here</th></tr>"
            + "".join(
                f"<tr><td>{catalog.entry_link(k)}</td><td>{catalog.link_refs(_e(v))}</td></tr>"
                for k, v in nc.items()
            )
            + "</table>"
        )
    return parts


def _against_is(key: tuple[str, str]) -> Callable[[dict], bool]:
    """Whether a result is a finding against this (library, role)."""
    return lambda r: key in against(r)


def _h_each_library(meta: dict, results: list[dict], checked: list[str]) -> list[str]:
    """One section per library of the run, with a navigation of its own: its version and roles,
    and its findings as producer and as consumer, each with its way out."""
    detail = {d["name"]: d for d in meta["libraries_detail"]}
    asks = consumer_versions(results)
    nav = (
        '<p class="small libnav"><a href="#libraries">all libraries</a> · '
        + " · ".join(f'<a href="#{_slug("lib", n)}">{_e(n)}</a>' for n in checked)
        + "</p>"
    )
    parts = ["<h2>Each library</h2>"]
    for name in checked:
        d = detail.get(name, {})
        roles = [r for r in ("producer", "consumer") if d.get(r)]
        head = f"{_e(name)} {_e(d.get('version') or '')}"
        parts.append(f'<div class=libsec id="{_slug("lib", name)}"><h3>{head}</h3>{nav}')
        parts.append(
            f"<p>{_e(', '.join(roles))}"
            + (f" · asks for {_e(asks[name])}" if name in asks else "")
            + (f" · <span class=small>{_e(d['note'])}</span>" if d.get("note") else "")
            + "</p>"
        )
        for role in roles:
            found = group_findings(results, _against_is((name, role)))
            count = sum(g["count"] for g in found)
            parts.append(f"<h4>As {role}: {count} finding(s)</h4>")
            if found:
                parts.append("<ol class=find>" + "".join(_h_finding(g) for g in found) + "</ol>")
        parts.append("</div>")
    return parts
