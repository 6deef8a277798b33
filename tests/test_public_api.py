"""scripts/public_api.py writes each public function with its signature, each field and
constant with its type: a changed parameter or return type changes docs/rust-public-api.txt,
so the check fails on it. The input is a small crate in rustdoc's JSON format (the fields the
script reads, as nightly rustdoc writes them)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

spec = importlib.util.spec_from_file_location("public_api", ROOT / "scripts" / "public_api.py")
assert spec is not None and spec.loader is not None
public_api = importlib.util.module_from_spec(spec)
spec.loader.exec_module(public_api)

NO_GENERICS = {"params": [], "where_predicates": []}
RUST = {"is_const": False, "is_unsafe": False, "is_async": False, "abi": "Rust"}
SELF_REF = {"borrowed_ref": {"lifetime": None, "is_mutable": False, "type": {"generic": "Self"}}}


def path(name: str, *args) -> dict:
    angle = {"angle_bracketed": {"args": [{"type": a} for a in args], "constraints": []}}
    return {"resolved_path": {"path": name, "id": 99, "args": angle if args else None}}


def function(inputs, output, unsafe=False, generics=NO_GENERICS) -> dict:
    header = dict(RUST, is_unsafe=unsafe)
    sig = {"inputs": inputs, "output": output, "is_c_variadic": False}
    return {"function": {"sig": sig, "generics": generics, "header": header, "has_body": True}}


def item(id_: int, name: str, inner: dict) -> dict:
    return {"id": id_, "crate_id": 0, "name": name, "visibility": "public", "inner": inner}


def crate() -> dict:
    """`pub struct Tensor { pub offset: u64 }` with three methods, and a free function."""
    element = {
        "name": "T",
        "kind": {
            "type": {
                "bounds": [
                    {
                        "trait_bound": {
                            "trait": {"path": "Element", "id": 98, "args": None},
                            "generic_params": [],
                            "modifier": "none",
                        }
                    }
                ],
                "default": None,
                "is_synthetic": False,
            }
        },
    }
    slice_t = {
        "borrowed_ref": {"lifetime": None, "is_mutable": False, "type": {"slice": {"generic": "T"}}}
    }
    items = [
        item(1, "demo", {"module": {"is_crate": True, "items": [2, 7], "is_stripped": False}}),
        item(
            2,
            "Tensor",
            {
                "struct": {
                    "kind": {"plain": {"fields": [3], "has_stripped_fields": False}},
                    "generics": NO_GENERICS,
                    "impls": [4],
                }
            },
        ),
        item(3, "offset", {"struct_field": {"primitive": "u64"}}),
        item(
            4,
            None,
            {
                "impl": {
                    "is_unsafe": False,
                    "generics": NO_GENERICS,
                    "provided_trait_methods": [],
                    "trait": None,
                    "for": path("Tensor"),
                    "items": [5, 6, 8],
                    "is_negative": False,
                    "is_synthetic": False,
                    "blanket_impl": None,
                }
            },
        ),
        item(
            5,
            "reshape",
            function(
                [["self", SELF_REF], ["shape", {"slice": {"primitive": "i64"}}]],
                path("Result", {"generic": "Self"}),
            ),
        ),
        item(
            6,
            "from_raw",
            function(
                [
                    ["data", {"raw_pointer": {"is_mutable": True, "type": path("c_void")}}],
                    ["readonly", {"primitive": "bool"}],
                ],
                path("Result", {"generic": "Self"}),
                unsafe=True,
            ),
        ),
        item(7, "count", function([["t", path("Tensor")]], {"primitive": "usize"})),
        item(
            8,
            "as_slice",
            function(
                [["self", SELF_REF]],
                path("Result", slice_t),
                generics={"params": [element], "where_predicates": []},
            ),
        ),
    ]
    return {"root": 1, "format_version": 57, "index": {str(i["id"]): i for i in items}}


def listing(doc: dict, tmp_path: Path) -> list[str]:
    json_path = tmp_path / "demo.json"
    json_path.write_text(json.dumps(doc))
    return public_api.render(public_api.api_lines(str(json_path))).splitlines()[2:]


def test_functions_carry_their_signatures_and_fields_their_types(tmp_path):
    assert listing(crate(), tmp_path) == [
        "mod demo",
        "struct demo::Tensor",
        "fn demo::Tensor::as_slice<T: Element>(&self) -> Result<&[T]>",
        "unsafe fn demo::Tensor::from_raw(data: *mut c_void, readonly: bool) -> Result<Self>",
        "field demo::Tensor::offset: u64",
        "fn demo::Tensor::reshape(&self, shape: [i64]) -> Result<Self>",
        "fn demo::count(t: Tensor) -> usize",
    ]


def test_a_changed_parameter_or_return_type_changes_the_list(tmp_path):
    before = listing(crate(), tmp_path)
    changed_input = crate()
    inputs = changed_input["index"]["6"]["inner"]["function"]["sig"]["inputs"]
    inputs[1][1] = path("Access")
    changed_output = crate()
    changed_output["index"]["7"]["inner"]["function"]["sig"]["output"] = {"primitive": "u64"}
    diff_input = set(listing(changed_input, tmp_path)) ^ set(before)
    diff_output = set(listing(changed_output, tmp_path)) ^ set(before)
    assert diff_input == {
        "unsafe fn demo::Tensor::from_raw(data: *mut c_void, readonly: bool) -> Result<Self>",
        "unsafe fn demo::Tensor::from_raw(data: *mut c_void, readonly: Access) -> Result<Self>",
    }
    assert diff_output == {"fn demo::count(t: Tensor) -> usize", "fn demo::count(t: Tensor) -> u64"}
