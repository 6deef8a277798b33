"""Simulated dlbridge crashes and hangs for the checker's own tests.

A test puts this folder on ``PYTHONPATH``; Python then imports this module at the start of
``python -m dlbridge check`` and of each of its worker processes. When
``DLBRIDGE_CHECK_TEST_CRASH`` or ``DLBRIDGE_CHECK_TEST_HANG`` names a unit
(``producer|consumer|case``), ``dlbridge.from_dlpack`` aborts the worker or hangs when the
dlbridge route of that unit calls it, at the stage the checker blames on dlbridge.
"""

import os
import sys

CRASH = os.environ.get("DLBRIDGE_CHECK_TEST_CRASH")
HANG = os.environ.get("DLBRIDGE_CHECK_TEST_HANG")


def _install() -> None:
    import dlbridge

    real = dlbridge.from_dlpack

    def from_dlpack(*args, **kwargs):
        # the dlbridge route's call: the worker's run_dlbridge(ctx, pname, cname, case)
        caller = sys._getframe(1)
        if caller.f_code.co_name == "run_dlbridge":
            names = caller.f_locals
            key = f"{names['pname']}|{names['cname']}|{names['case'].id}"
            if key == CRASH:
                os.abort()
            if key == HANG:
                import time

                time.sleep(3600)
        return real(*args, **kwargs)

    dlbridge.from_dlpack = from_dlpack


if CRASH or HANG:
    _install()
