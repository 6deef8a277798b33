"""``python -m dlbridge <command>``: ``check`` (the conformance checker, which the distribution
``dlbridge-check`` installs) and ``doctor`` (what is wrong with this environment)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = (
        "usage: python -m dlbridge check [--libraries numpy,torch] [--cases dtype,layout/*,C18] "
        "[--json FILE] [--html FILE] [--fail-on LIB]\n"
        "  check   exchange arrays between every pair of installed libraries, directly and through "
        "dlbridge, and report what works (python -m dlbridge check --help)\n"
        "usage: python -m dlbridge doctor [--json PATH|-] [--strict] [--probe]\n"
        "  doctor  report this environment and the known problems that apply to it, with their "
        "fixes (python -m dlbridge doctor --help)"
    )
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage)
        return 0 if argv else 2
    if argv[0] == "check":
        return _check(argv[1:])
    if argv[0] == "doctor":
        from .doctor import main as doctor_main

        return doctor_main(argv[1:])
    print(f"unknown command {argv[0]!r}\n{usage}", file=sys.stderr)
    return 2


def _check(argv: list[str]) -> int:
    """Run the conformance checker, a distribution of its own: when it is not installed, say
    how to install it (the same version as this dlbridge)."""
    from . import __version__

    install = (
        f"pip install dlbridge-check=={__version__} (in a checkout of dlbridge's sources: "
        "pip install ./checker)"
    )
    try:
        from dlbridge_check import main as check_main
    except ImportError as e:
        if e.name == "dlbridge_check":
            why = "python -m dlbridge check runs the conformance checker, which is not installed"
        elif e.name == "numpy":
            why = "python -m dlbridge check needs NumPy to compare values"
            install = "pip install numpy"
        else:  # installed, but something it needs is not: pip installs what is missing
            why = f"the conformance checker does not import ({e})"
        print(f"{why}: {install}", file=sys.stderr)
        return 2
    return check_main(argv)


if __name__ == "__main__":
    sys.exit(main())
