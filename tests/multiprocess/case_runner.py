"""Runs a worker's named cases and prints one ``RESULT <json>`` line (what ``harness.JobResult.results`` reads).

Each case's failure is reported as ``"<Error>: <message> [file:line]"`` and the next case runs;
the command line may name the cases to run (default: all).
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable


def _describe(e: BaseException) -> str:
    where = traceback.extract_tb(e.__traceback__)[-1]
    return f"{type(e).__name__}: {str(e)[:600]} [{where.filename.rsplit('/', 1)[-1]}:{where.lineno}]"


def run_and_report(cases: dict[str, Callable[[], object]]) -> None:
    out = {}
    only = set(sys.argv[1:])
    for name, fn in cases.items():
        if only and name not in only:
            continue
        try:
            fn()
            out[name] = "ok"
        except Exception as e:  # noqa: BLE001  (each case's failure is reported, the next one runs)
            out[name] = _describe(e)
            traceback.print_exc()
    print("RESULT " + json.dumps(out), flush=True)
    sys.stdout.flush()
