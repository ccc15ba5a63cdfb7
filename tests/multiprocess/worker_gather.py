"""Worker of test_gather_multi_worker.py: TensorFlow's GatherTest on a multi-worker job.

Runs the cases of ``tests/strategy/test_gather.py`` (TensorFlow's
``strategy_gather_test.py`` ported by renaming) on ``MultiWorkerMirroredStrategy``
over every process, in both of TensorFlow's modes (``pure_eager`` and inside
``tps.function``).

Run under ``python -m tpustrategy.launch -n 2 --devices-per-process L``; prints one
line ``RESULT <json>``: ``{"<case>/<mode>": "ok" | "<Error>: <message>"}``.
"""

from __future__ import annotations

import json
import sys
import traceback

import tpustrategy as tps

tps.initialize(initialization_timeout=30, heartbeat_timeout=10, shutdown_timeout=10, collective_timeout=30)

from tests.strategy.test_gather import CASES  # noqa: E402  (after initialize: it imports JAX)

strategy = tps.MultiWorkerMirroredStrategy()
only = set(sys.argv[1:])
out = {}
for name, case in CASES.items():
    for mode, pure_eager in (("pure_eager", True), ("tps.function", False)):
        key = f"{name}/{mode}"
        if only and key not in only:
            continue
        try:
            case(strategy, pure_eager)
            out[key] = "ok"
        except Exception as e:  # noqa: BLE001  (each case's failure is reported, the next one runs)
            where = traceback.extract_tb(e.__traceback__)[-1]
            out[key] = f"{type(e).__name__}: {str(e)[:600]} [{where.filename.rsplit('/', 1)[-1]}:{where.lineno}]"
            traceback.print_exc()
print("RESULT " + json.dumps(out), flush=True)
sys.stdout.flush()
