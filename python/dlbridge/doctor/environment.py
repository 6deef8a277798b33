"""What the doctor reads of this environment, all without importing an array library: the
interpreter, dlbridge's wheel, the installed distributions (package metadata only) and the
devices the operating system describes.

Nothing here loads a driver: the CUDA driver is reported as loaded only when something in this
process loaded it already, and the devices come from the files the kernel drivers publish.
This module imports nothing of dlbridge's, so that the error raised when dlbridge's extension
does not load can use it (:func:`extension_problem`).
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import os
import platform
import re
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

#: the entry point group in which a package registers its checker adapter (the checker's
#: group: the doctor lists the distributions that register one)
CHECK_GROUP = "dlbridge.check"
#: the library dlbridge loads for CUDA, and the variable naming another one instead
CUDA_LIBRARY, CUDA_OVERRIDE = "libcuda.so.1", "DLBRIDGE_CUDA_DRIVER"
#: PCI vendor id of Intel, whose GPUs are oneAPI's devices
INTEL_VENDOR = "0x8086"


@dataclass
class Interpreter:
    implementation: str
    version: str
    #: built without the GIL (free-threaded)
    free_threaded: bool
    #: the GIL is on in this process (always on a GIL build)
    gil_enabled: bool
    platform: str

    @property
    def tag(self) -> str:
        """The interpreter's ABI tag as wheel names write it (``cp314t``)."""
        major, minor = self.version.split(".")[:2]
        return f"cp{major}{minor}{'t' if self.free_threaded else ''}"


def interpreter() -> Interpreter:
    free = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    gil_on = getattr(sys, "_is_gil_enabled", lambda: True)()
    return Interpreter(
        platform.python_implementation(),
        platform.python_version(),
        free,
        bool(gil_on),
        f"{platform.system()} {platform.machine()}",
    )


@dataclass
class Wheel:
    """dlbridge's installed distribution: its version and the tags of its wheel."""

    version: str | None
    #: ``python-abi-platform`` tags of the WHEEL file (empty when there is none to read)
    tags: list[str] = field(default_factory=list)

    @property
    def abis(self) -> set[str]:
        return {t.split("-")[1] for t in self.tags if t.count("-") == 2}


def wheel(dist: str = "dlbridge") -> Wheel:
    try:
        d = md.distribution(dist)
    except md.PackageNotFoundError:
        return Wheel(None)
    text = d.read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Tag:")]
    return Wheel(d.version, tags)


def wheel_problem(tags: list[str], interp: Interpreter) -> str | None:
    """Why no tag of a wheel fits this interpreter (None when one fits, or there are no tags).
    Only the Python and ABI parts are compared; pip has matched the platform part."""
    if not tags:
        return None
    major, minor = (int(x) for x in interp.version.split(".")[:2])
    for tag in tags:
        python, abi, _ = tag.split("-")
        m = re.fullmatch(r"cp(\d)(\d+)", python)
        if m is None:
            continue
        need = (int(m[1]), int(m[2]))
        if abi == "abi3" and not interp.free_threaded and (major, minor) >= need:
            return None
        if abi == "abi3t" and (major, minor) >= need:
            return None
        if abi == interp.tag:
            return None
    if interp.free_threaded and any(t.split("-")[1] == "abi3" for t in tags):
        return (
            f"this dlbridge wheel ({', '.join(tags)}) is built for the stable ABI of GIL builds, "
            f"which a free-threaded interpreter ({interp.tag}) never loads: install dlbridge's "
            f"{interp.tag} wheel (pip install --force-reinstall --no-cache-dir dlbridge)"
        )
    return (
        f"this dlbridge wheel ({', '.join(tags)}) is not built for this interpreter "
        f"({interp.tag}): reinstall dlbridge with this interpreter's pip"
    )


def extension_problem() -> str:
    """What to say when dlbridge's extension does not import (and so the doctor cannot run):
    the wheel's mismatch with this interpreter when there is one, else the way out."""
    why = wheel_problem(wheel().tags, interpreter())
    if why is not None:
        return why
    return "reinstall dlbridge with this interpreter's pip (pip install --force-reinstall dlbridge)"


@dataclass
class Distribution:
    """An installed distribution (or, with ``version`` None, one that is not installed)."""

    #: the library's name in dlbridge (``cupy``), else the distribution's
    name: str
    #: the distribution that installs it (``cupy-cuda12x``)
    distribution: str
    version: str | None
    #: why the doctor lists it: ``library`` (one dlbridge converts to), ``adapter NAME`` (it
    #: registers a checker adapter), ``known problem`` (a known problem names it)
    why: str
    #: the module it installs, when the doctor knows it
    module: str = ""


def version_of(dist: str) -> str | None:
    """The installed version of ``dist`` (None when not installed)."""
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def checker_problem(checker: str | None, dlbridge: str | None) -> str | None:
    """What is wrong with the installed conformance checker (dlbridge-check ``checker``) beside
    dlbridge ``dlbridge``: it is released with each dlbridge version and judges that one."""
    if checker is None or dlbridge is None or checker == dlbridge:
        return None
    return (
        f"dlbridge-check {checker} is made for dlbridge {checker}, not this dlbridge {dlbridge}: "
        f"pip install dlbridge-check=={dlbridge}"
    )


def library(name: str, module: str, dist: str) -> Distribution:
    """The distribution of one of dlbridge's libraries: ``dist`` when installed, else the one
    named as its top-level module (``tensorflow`` where the pip spec says ``tensorflow-cpu``),
    else the distribution that installs that module (``cupy-cuda12x`` for ``cupy``), found
    without importing it."""
    top = module.split(".")[0]
    for candidate in (dist, top):
        version = version_of(candidate)
        if version is not None:
            return Distribution(name, candidate, version, "library", module)
    try:
        found = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        found = False
    if found:  # reading what every distribution installs costs a second in a large venv
        for other in md.packages_distributions().get(top, ()):
            return Distribution(name, other, version_of(other), "library", module)
    return Distribution(name, dist, None, "library", module)


def registered() -> list[Distribution]:
    """The distributions that register a checker adapter (entry point group ``dlbridge.check``)."""
    out: dict[str, Distribution] = {}
    for ep in md.entry_points(group=CHECK_GROUP):
        dist = ep.dist
        name = dist.metadata["Name"] if dist is not None else ep.value.split(":")[0]
        version = dist.version if dist is not None else None
        out.setdefault(name, Distribution(name, name, version, f"adapter {ep.name}"))
    return list(out.values())


@dataclass
class Cuda:
    """The CUDA driver as this process and the kernel describe it."""

    #: the library dlbridge loads on its first CUDA operation
    library: str
    #: the path of a CUDA driver library mapped into this process ("" when none is)
    loaded: str
    #: the kernel driver's version (/proc/driver/nvidia/version), "" when there is none
    kernel_driver: str
    #: the GPUs the kernel driver lists
    devices: list[str]


def cuda(root: Path = Path("/")) -> Cuda:
    """Read the CUDA driver's state under ``root`` (``/``; tests pass a directory laid out
    like it)."""
    library = os.environ.get(CUDA_OVERRIDE) or CUDA_LIBRARY
    wanted = (Path(library).name, "libcuda.so")
    loaded = ""
    maps = _read(root / "proc/self/maps")
    for line in maps.splitlines():
        path = line.split()[-1] if len(line.split()) >= 6 else ""
        if any(Path(path).name.startswith(w) for w in wanted):
            loaded = path
            break
    version_text = _read(root / "proc/driver/nvidia/version")
    m = re.search(r"Kernel Module\s+(?:for\s+\S+\s+)?(\d[\w.]*)", version_text)
    kernel = m[1] if m else ("?" if version_text else "")
    devices = []
    gpus = root / "proc/driver/nvidia/gpus"
    for info in sorted(gpus.glob("*/information")) if gpus.is_dir() else []:
        model = re.search(r"^Model:\s*(.+)$", _read(info), re.MULTILINE)
        devices.append(f"{info.parent.name}: {model[1].strip() if model else '?'}")
    return Cuda(library, loaded, kernel, devices)


def oneapi_devices(root: Path = Path("/")) -> list[str]:
    """Intel GPUs the kernel lists (the devices a oneAPI runtime would find), by DRM card."""
    drm = root / "sys/class/drm"
    found = []
    for card in sorted(drm.glob("card*")) if drm.is_dir() else []:
        if "-" in card.name:  # card0-DP-1: a connector, not a device
            continue
        if _read(card / "device/vendor").strip() == INTEL_VENDOR:
            found.append(f"{card.name}: Intel GPU {_read(card / 'device/device').strip()}")
    return found


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
