"""Measures the fault matrix: seconds from a fault to each survivor's exit, and the exit codes.

    .venv/bin/python tools/fault_matrix.py                 # default and tuned settings
    .venv/bin/python tools/fault_matrix.py --settings tuned --faults kill,stop

Each case runs 2 processes x 2 fake CPU devices (tests/multiprocess/worker_fault_matrix.py)
through ``python -m tpustrategy.launch`` and as plain processes with ``TF_CONFIG``; one
process suffers the fault (kill = SIGKILL, stop = SIGSTOP, raise = ValueError, exit =
os._exit(3), never = never calls tps.initialize) while the other waits in a compiled
cross-process sum. "default" uses ``tps.initialize()`` as is (heartbeat_timeout=30,
initialization_timeout=300: "never" then takes 300 s and is skipped unless
``--include-slow``); "tuned" uses heartbeat_timeout=3 (initialization_timeout=14).
Prints one Markdown table.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.multiprocess.test_fault_matrix import (  # noqa: E402
    _FATAL,
    run_launcher_job,
    run_tf_config_job,
)

SETTINGS = {"default": "default", "tuned": "3"}


def _tf_config_row(fault: str, victim: int, heartbeat: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        outcome = run_tf_config_job(pathlib.Path(tmp), fault, victim, heartbeat=heartbeat,
                                    limit=400)
    survivor = 1 - victim
    marker = outcome.marker(survivor) or {}
    seconds = outcome.ended_after.get(survivor)
    fatal = bool(_FATAL.search(outcome.stderr[survivor]))
    return (f"{outcome.codes[survivor]} | {seconds:.1f} | {marker.get('culprits')} | "
            f"{outcome.codes[victim]} | {'yes' if fatal else 'no'}") if seconds is not None \
        else f"{outcome.codes[survivor]} | (did not end) | {marker.get('culprits')} | - | -"


def _launcher_row(fault: str, victim: int, heartbeat: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        code, err, seconds = run_launcher_job(pathlib.Path(tmp), fault, victim,
                                              heartbeat=heartbeat, limit=400)
    survivor = 1 - victim
    found = re.search(rf"process {survivor} exited with code (\d+)", err)
    report = next((line for line in err.splitlines() if line.startswith("tpustrategy.launch")),
                  "")
    first = re.search(r"tpustrategy.launch: process (\d+)", report)
    return (f"{found.group(1) if found else '-'} | {seconds:.1f} (launcher) | "
            f"first: {first.group(1) if first else '-'} | launcher {code} | "
            f"{'yes' if _FATAL.search(err) else 'no'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default="default,tuned")
    parser.add_argument("--faults", default="kill,stop,raise,exit,never")
    parser.add_argument("--paths", default="tf_config,launcher")
    parser.add_argument("--victims", default="1,0")
    parser.add_argument("--include-slow", action="store_true")
    args = parser.parse_args(argv)
    print("| fault | victim | path | settings | survivor exit code | seconds to exit after "
          "the fault | named | victim / launcher code | SIGABRT or fatal log |")
    print("|---|---|---|---|---|---|---|---|---|")
    for fault in args.faults.split(","):
        for victim in map(int, args.victims.split(",")):
            for settings in args.settings.split(","):
                if fault == "never" and settings == "default" and not args.include_slow:
                    continue
                for path in args.paths.split(","):
                    row = (_tf_config_row if path == "tf_config" else _launcher_row)(
                        fault, victim, SETTINGS[settings])
                    print(f"| {fault} | {victim} | {path} | {settings} | {row} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
