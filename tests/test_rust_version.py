"""Every mention of a minimum Rust version says what the build checks: the workspace's
``rust-version`` (Cargo.toml), or, next to the word arrow, the ``arrow-rs`` feature's minimum
that scripts/msrv_check.sh builds with."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# A line that speaks of a Rust toolchain; a version on it is a promise about the toolchain.
RUST_WORDS = re.compile(r"Rust|rust-version|toolchain|rustup|MSRV")
VERSION = re.compile(r"(?<![\d.])1\.\d{2}(?![\d.])")


def minimum() -> str:
    with open(REPO / "Cargo.toml", "rb") as f:
        return tomllib.load(f)["workspace"]["package"]["rust-version"]


def arrow_rs_minimum() -> str:
    script = (REPO / "scripts" / "msrv_check.sh").read_text()
    match = re.search(r"^ARROW_RS_MSRV=(\S+)$", script, re.MULTILINE)
    assert match, "scripts/msrv_check.sh sets no ARROW_RS_MSRV"
    return match.group(1)


def texts() -> list[Path]:
    """What states the promise: the manifests, READMEs, docs, contributor guide, Rust sources
    (their doc comments) and scripts."""
    files = [REPO / "Cargo.toml", REPO / "README.md", REPO / "CONTRIBUTING.md"]
    files += sorted((REPO / "docs").rglob("*.md"))
    files += sorted((REPO / "crates").glob("*/Cargo.toml"))
    files += sorted((REPO / "crates").glob("*/README.md"))
    files += sorted((REPO / "crates").rglob("*.rs"))
    files += sorted((REPO / "scripts").glob("*.sh"))
    return files


def mentions() -> list[tuple[str, str, str]]:
    """(where, version, line) for every version written on a line about a Rust toolchain."""
    found = []
    for path in texts():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not RUST_WORDS.search(line):
                continue
            for version in VERSION.findall(line):
                found.append((f"{path.relative_to(REPO)}:{number}", version, line.strip()))
    return found


def test_every_mention_of_the_minimum_rust_version_is_the_manifests():
    msrv, arrow_rs = minimum(), arrow_rs_minimum()
    found = mentions()
    wrong = [
        f"{where}: {version}: {line}"
        for where, version, line in found
        if version != msrv and not (version == arrow_rs and "arrow" in line.lower())
    ]
    assert not wrong, (
        f"the minimum Rust version is {msrv} (Cargo.toml rust-version), {arrow_rs} with "
        "arrow-rs (scripts/msrv_check.sh); these lines say otherwise:\n" + "\n".join(wrong)
    )
    # the scan sees the promise where it is made (a broken pattern would find nothing)
    places = {where.split(":")[0] for where, version, _ in found if version == msrv}
    assert {"Cargo.toml", "README.md", "crates/dlbridge/src/lib.rs"} <= places, places
    assert any(version == arrow_rs for _, version, _ in found)


def test_the_msrv_check_builds_every_crate_and_target():
    script = (REPO / "scripts" / "msrv_check.sh").read_text()
    commands = re.findall(r"^\s*cargo \"\+\$version\" check (.*)$", script, re.MULTILINE)
    assert commands, "scripts/msrv_check.sh runs no cargo check"
    for command in commands:
        assert "--workspace" in command.split() and "--all-targets" in command.split(), command
