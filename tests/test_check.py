"""The conformance checker (``python -m dlbridge check``): runs, the JSON report against its
schema, exit statuses, isolation of crashes and hangs. Kept fast: NumPy (and torch when
installed) with a few cases; the runs that can take minutes are marked ``slow``."""

from __future__ import annotations

import html
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numpy")

from dlb_testing import CHECKER_SMOKE_CASES, require_sycl, run_checker
from dlbridge_check import libraries, report

FAST = ("dtype/float32,dtype/bool,layout/transposed,layout/neg_cols,readonly/contiguous,"
        "copy/false,capsule/consumed,hostile/major2")
DOCS = Path(__file__).resolve().parent.parent / "docs" / "checker.md"

#: the JSON types of a schema's "type" keyword
JSON_TYPES = {
    "object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
    "integer": int, "number": (int, float),
}


def schema_errors(value, schema: dict, root: dict, where: str = "$") -> list[str]:
    """Where ``value`` breaks ``schema``: the part of JSON Schema report.schema.json uses
    ($ref, type, const, enum, minimum, pattern, properties, required, additionalProperties,
    items)."""
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].removeprefix("#/$defs/")]
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        is_bool = isinstance(value, bool)
        if not any(isinstance(value, JSON_TYPES[t]) and (t == "boolean" or not is_bool)
                   for t in types):
            return [f"{where}: {value!r:.80} is not {types}"]
    if "const" in schema and value != schema["const"]:
        return [f"{where}: {value!r} != {schema['const']!r}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: {value!r} not in {schema['enum']}"]
    if "minimum" in schema and value < schema["minimum"]:
        return [f"{where}: {value!r} < {schema['minimum']}"]
    if "pattern" in schema and not re.search(schema["pattern"], value):
        return [f"{where}: {value!r} does not match {schema['pattern']}"]
    errors = []
    if isinstance(value, dict):
        props = schema.get("properties", {})
        errors += [f"{where}: no {k!r}" for k in schema.get("required", []) if k not in value]
        extra = schema.get("additionalProperties", True)
        for k, v in value.items():
            if k in props:
                errors += schema_errors(v, props[k], root, f"{where}.{k}")
            elif extra is False:
                errors.append(f"{where}: {k!r} is not in the schema")
            elif isinstance(extra, dict):
                errors += schema_errors(v, extra, root, f"{where}.{k}")
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            errors += schema_errors(v, schema["items"], root, f"{where}[{i}]")
    return errors


def assert_schema(doc: dict) -> None:
    """The report is valid against the schema the package ships, and consistent."""
    schema = report.json_schema()
    assert schema_errors(doc, schema, schema) == []
    assert doc["schema_version"] == report.SCHEMA_VERSION
    assert "numpy" in doc["libraries"]
    assert doc["results"], "no results"
    s = doc["summary"]
    assert set(s["by_route"]) == {"direct", "dlbridge"}
    assert sum(s["by_route"]["direct"].values()) + sum(s["by_route"]["dlbridge"].values()) == len(
        doc["results"]
    )


def test_numpy_only(tmp_path):
    run = run_checker(tmp_path, "--libraries", "numpy", "--cases", FAST, expect=None, html=True)
    proc, doc, page = run.proc, run.doc, run.page
    assert proc.returncode in (0, 1), proc.stderr
    assert doc is not None, proc.stderr
    assert_schema(doc)
    # the exit status says whether dlbridge itself failed, and matches the JSON
    dlb_fail = [
        r
        for r in doc["results"]
        if r.get("fault") == "dlbridge" and r["status"] in ("fail", "error", "crash", "timeout")
    ]
    assert proc.returncode == (1 if dlb_fail else 0) == doc["summary"]["exit_status"], dlb_fail
    assert doc["summary"]["exit_status"] == 0, dlb_fail  # these cases must pass through dlbridge
    # the findings (NumPy's consumed capsule, C18, is one of NumPy 2.5) name the doctor, which
    # knows the releases behind known problems
    if doc["summary"]["findings"]:
        assert report.DOCTOR_HINT in proc.stdout and html.escape(report.DOCTOR_HINT) in page
    # numpy, the reference producer/consumer and Python's memoryview take part
    producers = {r["producer"] for r in doc["results"]}
    assert {"numpy", "dlpack-ref", "python"} <= producers
    assert {r["consumer"] for r in doc["results"]} == {"numpy", "dlpack-ref"}
    by = {(r["producer"], r["consumer"], r["case"], r["route"]): r for r in doc["results"]}
    assert by[("numpy", "numpy", "dtype/float32", "direct")]["status"] == "pass"
    assert by[("numpy", "numpy", "dtype/float32", "dlbridge")]["status"] == "pass"
    # dlbridge refuses an unknown major version (C17) and calls the deleter
    assert by[("dlpack-ref", "numpy", "hostile/major2", "dlbridge")]["status"] == "pass"
    # a read-only numpy array stays read-only through dlbridge into numpy (C14)
    assert by[("numpy", "numpy", "readonly/contiguous", "dlbridge")]["status"] == "pass"
    assert by[("numpy", "numpy", "readonly/contiguous", "dlbridge")]["refs"] == [
        "C12",
        "C14",
        "C15",
        "C16",
    ]
    # the memoryview has no __dlpack__: numpy cannot take it, dlbridge can
    assert by[("python", "numpy", "dtype/float32", "direct")]["status"] == "unsupported"
    assert by[("python", "numpy", "dtype/float32", "dlbridge")]["status"] == "pass"
    # terminal summary: versions, both matrices, the verdict
    assert "numpy" in proc.stdout and doc["libraries"]["numpy"] in proc.stdout
    assert "Direct:" in proc.stdout and "Through dlbridge:" in proc.stdout
    assert "dlbridge itself failed no case" in proc.stdout
    # the JSON carries the catalog entries the results name
    assert doc["catalog"]["C14"]["reports"] and doc["catalog"]["C14"]["dlbridge"]
    # the reports name the catalog, never files a wheel user does not have or tracker numbers
    assert "Catalog cases not exercised here" in proc.stdout
    for text in (proc.stdout, json.dumps(doc), page):
        assert "CASES.md" not in text and not re.search(r"\bissue \d", text)
        assert not re.search(r"\b(tests|crates)/\w", text), re.search(
            r".{60}\b(tests|crates)/\w.{60}", text
        )
    # the HTML page is self-contained: no loaded resources; web addresses only as links to reports
    assert page is not None and page.startswith("<!doctype html>")
    assert (
        "<script src" not in page
        and "<link" not in page
        and not re.search(r'src="http|url\(', page)
    )
    assert "dtype/float32" in page
    assert_html_links(page)
    # case ids and catalog ids link to their entries, embedded in the page
    assert 'id="catalog"' in page and 'id="C14"' in page and 'id="case-dtype-float32"' in page
    assert '<a href="#case-dtype-float32"><code>dtype/float32</code></a>' in page
    assert re.search(r'<a href="#C14" title="[^"]+">C14</a>', page)
    assert 'href="https://github.com/numpy/numpy/pull/28600"' in page  # C14's report, as a link


def assert_html_links(page: str) -> None:
    """Every in-page link has its target; web addresses appear only as links."""
    ids = set(re.findall(r'\sid="([^"]+)"', page))
    for target in re.findall(r'href="#([^"]+)"', page):
        assert target in ids, target
    for url in re.findall(r'https?://[^"<\s]+', page):
        assert re.search(rf'href="{re.escape(url)}"', page), url
    assert "CASES.md" not in page and not re.search(r"\bissue \d", page)


def test_numpy_torch(tmp_path):
    pytest.importorskip("torch")
    run = run_checker(
        tmp_path,
        "--libraries",
        "numpy,torch",
        "--cases",
        "readonly/contiguous,dtype/float32,layout/neg_cols",
        expect=None,
    )
    proc, doc = run.proc, run.doc
    assert doc is not None, proc.stderr
    assert_schema(doc)
    assert set(doc["libraries"]) >= {"numpy", "torch"}
    by = {(r["producer"], r["consumer"], r["case"], r["route"]): r for r in doc["results"]}
    assert by[("torch", "numpy", "dtype/float32", "direct")]["status"] == "pass"
    assert by[("numpy", "torch", "dtype/float32", "dlbridge")]["status"] == "pass"
    # torch cannot be read-only: aliasing a read-only numpy array is a failure of the pair
    # (C15/C16),
    # never dlbridge's (it exports the READ_ONLY flag), so it does not change the exit status
    ro = by[("numpy", "torch", "readonly/contiguous", "direct")]
    if ro["status"] == "fail":
        assert ro["fault"] != "dlbridge" and "read-only" in ro["detail"]
    ro_dlb = by[("numpy", "torch", "readonly/contiguous", "dlbridge")]
    assert ro_dlb.get("fault") != "dlbridge", ro_dlb
    # torch cannot express negative strides as a producer
    assert by[("torch", "numpy", "layout/neg_cols", "direct")]["status"] == "unsupported"
    assert proc.returncode == doc["summary"]["exit_status"]


#: What a library's row expects other than "pass", by (producer, consumer, case, route): the
#: peers' own limits, which stay visible in the checker's report.
ROW_EXPECTS: dict[str, dict[tuple[str, str, str, str], str]] = {
    # mx.from_dlpack narrows float64 to float32 (dlbridge's route too: MLX does the import)
    "mlx": {("numpy", "mlx", "dtype/float64", "direct"): "fail"},
    # pandas has neither __dlpack__ nor from_dlpack
    "pandas": {
        ("pandas", "numpy", "dtype/float32", "direct"): "unsupported",
        ("numpy", "pandas", "dtype/float32", "direct"): "unsupported",
    },
    # Arrow producers without __dlpack__: only dlbridge's route reads them
    "nanoarrow": {("nanoarrow", "numpy", "dtype/float32", "direct"): "unsupported"},
    "arro3": {("arro3", "numpy", "dtype/float32", "direct"): "unsupported"},
    "polars": {("polars", "numpy", "dtype/float32", "direct"): "unsupported"},
}


# one row per checker adapter (the built-in reference and memoryview producers are in every run)
@pytest.mark.slow
@pytest.mark.parametrize("name", [cls.name for cls in libraries.ALL_LIBRARIES if not cls.builtin])
def test_checker_runs_library_as_producer_and_consumer(tmp_path, name):
    lib = libraries.by_name()[name]
    if not lib.installed():  # CuPy without a CUDA device too
        pytest.skip(f"{name} is not installed or not usable here")
    if name == "dpnp":
        require_sycl()
    run = run_checker(tmp_path, "--libraries", f"numpy,{name}", "--cases", CHECKER_SMOKE_CASES)
    doc, results = run.doc, run.results
    assert name in doc["libraries"]
    want = {}
    for producer, consumer, role in ((name, "numpy", lib.producer), ("numpy", name, lib.consumer)):
        for route in ("direct", "dlbridge"):
            if role:
                want[(producer, consumer, "dtype/float32", route)] = "pass"
    want.update(ROW_EXPECTS.get(name, {}))
    assert {key: results.get(key, {}).get("status") for key in want} == want


def test_every_namespace_has_its_adapter_beside_it():
    # a library's checker adapter is in the module of the checker's adapters/ named as its
    # namespace's module (dlbridge, the library under test, has none), with the namespace's
    # name and module
    from dlbridge import namespaces as nsmod

    adapters = libraries.by_name()
    for name in (n for n in nsmod.NAMES if n != "dlbridge"):
        ns = nsmod.get(name)
        family = type(ns).__module__.rpartition(".")[2]
        assert type(adapters[name]).__module__ == f"dlbridge_check.adapters.{family}", name
        assert (adapters[name].module, adapters[name].pip) == (ns.module, ns.pip), name


def test_one_rank_per_library_set_in_its_namespace():
    # the checker's order is convert's: an adapter with a namespace takes its rank from it
    from dlbridge import namespaces as nsmod

    ordered = [cls.name for cls in libraries.ALL_LIBRARIES if cls.name in nsmod.NAMES]
    assert ordered == [n for n in nsmod.NAMES if n != "dlbridge"]
    for cls in libraries.ALL_LIBRARIES:
        if cls.name in nsmod.NAMES:
            assert cls.rank == type(nsmod.get(cls.name)).rank, cls.name


def test_one_discovery_loop_per_distribution():
    # dlbridge's registry of namespaces has one helper that finds classes in a package's modules;
    # the checker, a distribution that reads only dlbridge's public surface, has its own for its
    # adapters. No module loops over modules by hand besides those two.
    from pathlib import Path

    import dlbridge

    def loops(package: Path) -> list[str]:
        return [
            str(path.relative_to(package))
            for path in sorted(package.rglob("*.py"))
            if "iter_modules(" in path.read_text()
        ]

    assert loops(Path(dlbridge.__file__).parent) == ["_discover.py"]
    assert loops(Path(libraries.__file__).parent) == ["libraries.py"]


@pytest.mark.slow
def test_tensorflow_producer_and_consumer(tmp_path):
    if importlib.util.find_spec("tensorflow") is None:  # not imported here: it takes seconds
        pytest.skip("tensorflow is not installed")
    run = run_checker(
        tmp_path,
        "--libraries",
        "numpy,tensorflow",
        "--cases",
        "dtype/int32,layout/transposed,device/tf_gpu_scope",
        expect=None,
        html=True,
    )
    doc, page = run.doc, run.page
    assert doc is not None, run.output
    assert_schema(doc)
    assert "tensorflow" in doc["libraries"]
    by = run.results
    for route in ("direct", "dlbridge"):
        assert by[("tensorflow", "numpy", "dtype/int32", route)]["status"] == "pass"
        assert by[("numpy", "tensorflow", "dtype/int32", route)]["status"] == "pass"
    # C31: created under a GPU scope, the tensor reports the device its bytes are on and the
    # consumer gets the right values
    for route in ("direct", "dlbridge"):
        assert by[("tensorflow", "numpy", "device/tf_gpu_scope", route)]["status"] == "pass"
    assert "C31" in doc["summary"]["coverage"]["covered"]
    # TensorFlow's consumer units run in one worker of their own (imported once, not once per
    # producer)
    assert "consumer tensorflow" in doc["batch_seconds"]
    assert not any(
        "tensorflow" in k
        for k in doc["batch_seconds"]
        if k not in ("consumer tensorflow", "tensorflow")
    )
    # TensorFlow imports row-major data only and says so with its own exception, not BufferError
    # (a limitation of the peer, never dlbridge's fault)
    tr = by[("numpy", "tensorflow", "layout/transposed", "direct")]
    assert tr["status"] in ("error", "pass") and tr.get("fault") != "dlbridge", tr
    assert doc["summary"]["exit_status"] == 0
    # both roles appear in the HTML matrices
    assert (
        "<th>tensorflow</th>" in page
        and "tensorflow → numpy" in page
        and "numpy → tensorflow" in page
    )
    assert_html_links(page)
    assert '<a href="#case-device-tf-gpu-scope"><code>device/tf_gpu_scope</code></a>' in page
    assert 'id="C31"' in page


def test_crash_and_hang_are_isolated(tmp_path):
    # a simulated abort and a simulated hang inside dlbridge.from_dlpack are recorded as such,
    # the other cases still run, and dlbridge's crash makes the exit status 1
    # (tests/checker_faults simulates both; nothing of it ships in the package)
    run = run_checker(
        tmp_path,
        "--libraries",
        "numpy",
        "--cases",
        "dtype/int8,dtype/int16,dtype/int32",
        "--timeout",
        "2",
        "--jobs",
        "2",
        crash="numpy|numpy|dtype/int8",
        hang="numpy|numpy|dtype/int16",
        expect=1,
    )
    proc, doc = run.proc, run.doc
    assert doc is not None, proc.stderr
    assert_schema(doc)
    by = {(r["producer"], r["consumer"], r["case"], r["route"]): r for r in doc["results"]}
    crash = by[("numpy", "numpy", "dtype/int8", "dlbridge")]
    assert (
        crash["status"] == "crash" and crash["fault"] == "dlbridge" and "SIGABRT" in crash["detail"]
    )
    hang = by[("numpy", "numpy", "dtype/int16", "dlbridge")]
    assert hang["status"] == "timeout" and hang["fault"] == "dlbridge"
    assert by[("numpy", "numpy", "dtype/int32", "dlbridge")]["status"] == "pass"
    assert by[("numpy", "numpy", "dtype/int8", "direct")]["status"] == "pass"
    assert proc.returncode == 1 and doc["summary"]["exit_status"] == 1
    assert "dtype/int8" in proc.stdout


def test_fail_on_makes_findings_against_a_library_red(tmp_path):
    # torch aliases a read-only source as a writable tensor (C16): a finding against torch as
    # consumer, which --fail-on torch turns into exit status 3; numpy has none
    pytest.importorskip("torch")
    run = run_checker(
        tmp_path, "--libraries", "numpy,torch", "--cases", "readonly/contiguous,dtype/float32",
        "--fail-on", "torch", expect=report.EXIT_FAIL_ON, html=True,
    )
    assert run.doc is not None
    assert_schema(run.doc)
    ro = run.results[("numpy", "torch", "readonly/contiguous", "direct")]
    assert ro["status"] == "fail" and ro["fault"] == "consumer", ro
    s = run.doc["summary"]
    assert s["fail_on"] == ["torch"] and s["exit_status"] == report.EXIT_FAIL_ON
    assert s["by_library"]["torch"]["consumer"] >= 1
    assert s["by_library"]["numpy"] == {"producer": 0, "consumer": 0}
    assert "--fail-on torch: " in run.proc.stdout and "exit status 3" in run.proc.stdout
    # torch's section of the HTML report: the finding as consumer, with its way out
    assert run.page is not None
    assert_html_links(run.page)
    torch_section = run.page.split('id="lib-torch"')[1].split("</div>")[0]
    assert "As consumer: " in torch_section and "readonly/contiguous" in torch_section
    assert "<b>workaround:</b> pass copy=True" in torch_section
    assert '<a href="#lib-torch">torch</a>' in run.page  # the libraries table links to it


def test_docs_describe_every_field_of_the_json_report():
    schema = report.json_schema()
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## JSON report schema")[1].split("\n## ")[0]
    fields: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            fields.update(node.get("properties", {}))
            for value in node.values():
                walk(value)

    walk(schema)
    assert len(fields) > 40
    assert sorted(f for f in fields if f"`{f}`" not in section) == []
    assert f"version {report.SCHEMA_VERSION}" in schema["description"]


def test_cli_errors_and_listing(tmp_path):
    bad = run_checker(tmp_path, "--libraries", "nosuchlib", expect=2).proc
    assert "unknown library nosuchlib" in bad.stderr
    bad = run_checker(tmp_path, "--fail-on", "nosuchlib", expect=2).proc
    assert "unknown library nosuchlib" in bad.stderr
    # a library that the run does not check cannot make it red: a usage error, not a silent 0
    bad = run_checker(tmp_path, "--libraries", "numpy", "--fail-on", "torch", expect=2).proc
    assert "--fail-on names libraries this run does not check: torch" in bad.stderr
    lst = run_checker(tmp_path, "--list-cases").proc
    assert "capsule/consumed" in lst.stdout and "C18" in lst.stdout
    helptext = run_checker(tmp_path, "--help").proc.stdout
    assert "catalog cases (C1)" in " ".join(helptext.split()) and "CASES.md" not in helptext
    assert "--fail-on" in helptext
    usage = subprocess.run([sys.executable, "-m", "dlbridge"], capture_output=True, text=True)
    assert usage.returncode == 2 and "check" in usage.stdout


def test_catalog_covers_named_rows():
    from dlbridge_check.cases import CASES, NOT_COVERED

    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    refs = {r for c in CASES for r in c.refs}
    # every catalog entry is either exercised by some case or explained
    from dlbridge_check.catalog import ENTRIES

    for i in range(1, len(ENTRIES) + 1):
        assert f"C{i}" in refs or f"C{i}" in NOT_COVERED, f"C{i}"
    for c in CASES:
        assert c.feature and c.title


def test_summary_exit_status():
    base = {
        "case": "dtype/float32",
        "refs": [],
        "producer": "numpy",
        "consumer": "numpy",
        "detail": "x",
        "check": None,
    }
    ok = [
        {**base, "route": "direct", "status": "fail", "fault": "peers"},
        {**base, "route": "dlbridge", "status": "pass", "fault": None},
    ]
    s = report.summarize(ok, {}, 1.0, ["numpy"], ["numpy"])
    assert s["exit_status"] == 0
    bad = ok + [
        {
            **base,
            "case": "layout/transposed",
            "route": "dlbridge",
            "status": "error",
            "fault": "dlbridge",
        }
    ]
    s = report.summarize(bad, {}, 1.0, ["numpy"], ["numpy"])
    assert s["exit_status"] == 1 and s["dlbridge_failure_cases"] == ["layout/transposed"]
    # --fail-on: a finding of the pair counts against both peers; dlbridge's own failure wins
    s = report.summarize(ok, {}, 1.0, ["numpy"], ["numpy"], fail_on=["numpy"])
    assert s["exit_status"] == report.EXIT_FAIL_ON
    assert s["by_library"] == {"numpy": {"producer": 1, "consumer": 1}}
    s = report.summarize(bad, {}, 1.0, ["numpy"], ["numpy"], fail_on=["numpy"])
    assert s["exit_status"] == report.EXIT_DLBRIDGE
    passing = [{**r, "status": "pass", "fault": None} for r in ok]
    s = report.summarize(passing, {}, 1.0, ["numpy"], ["numpy"], fail_on=["numpy"])
    assert s["exit_status"] == 0


def test_legacy_capsule_clauses_come_from_the_published_table():
    # the reports' notes say what dlbridge does with a producer's legacy capsules from the one
    # table dlbridge publishes, never in words written by hand
    import dlbridge._native as native

    legacy = [cls for cls in libraries.ALL_LIBRARIES if cls.legacy_capsules]
    assert {cls.name for cls in legacy} >= {"mlx", "warp"}
    for cls in libraries.ALL_LIBRARIES:
        assert "read-only by dlbridge" not in cls.note, cls.name
        assert "capsules import" not in cls.note, cls.name
    for cls in legacy:
        writable = cls.module.split(".")[0] in native._LEGACY_CAPSULES_WRITABLE
        clause = "import writable" if writable else "import read-only"
        assert clause in cls().described(), cls.name
    assert "import writable" in libraries.by_name()["mlx"].described()


@pytest.mark.parametrize("consumer, fault", [("torch", "peers"), ("mlx", "consumer")])
def test_a_crash_after_a_double_free_in_the_process_is_not_blamed_on_dlbridge(consumer, fault):
    """A consumer that frees a refused capsule's tensor and leaves the capsule to free it again
    (MLX does) corrupts the worker's memory; a crash later in that process, at a stage that would
    be dlbridge's, is put down to it."""
    import tempfile

    from dlbridge_check.runner import Batch

    units = [("dlpack-ref", "mlx", "dtype/int8", "direct"),
             ("dlpack-ref", consumer, "dtype/int16", "dlbridge")]

    def crash_after(double_free: bool) -> dict:
        batch = Batch(units, timeout=1.0, startup_timeout=1.0)
        first = {"status": "error", "detail": "deleter called 2 times", "fault": "consumer",
                 "check": "exception"}
        checks = ["exception", "deleter", "double_free"] if double_free else ["exception"]
        batch._record(0, first, checks)
        batch._note_double_free(0, first, checks)
        with tempfile.TemporaryFile() as err:
            batch._after_death([0, 1], 1, {0}, "inspect dlbridge.Tensor", err, hang=False,
                               ready=True, rc=-11)
        result = batch.results[1]
        assert result is not None and result["status"] == "crash"
        return result

    after = crash_after(double_free=True)
    assert after["fault"] == fault and "mlx freed a capsule's tensor twice" in after["detail"]
    assert crash_after(double_free=False)["fault"] == "dlbridge"
