"""Measures the fault matrix: seconds from a fault to each survivor's exit, and the exit codes.

    .venv/bin/python tools/fault_matrix.py                          # 2, 3 and 4 processes
    .venv/bin/python tools/fault_matrix.py --processes 3 --settings tuned --faults kill,stop

Each case runs N processes x 2 fake CPU devices (tests/multiprocess/worker_fault_matrix.py)
through ``python -m tpustrategy.launch`` and as plain processes with ``TF_CONFIG``; one
process (by default each process in turn, process 0 — the coordinator's host — included)
suffers the fault (kill = SIGKILL, stop = SIGSTOP, raise = ValueError, exit = os._exit(3),
never = never calls tps.initialize) while the others wait in a compiled cross-process sum.
"default" uses ``tps.initialize()`` as is (heartbeat_timeout=30, initialization_timeout=300:
"never" then takes 300 s and is skipped unless ``--include-slow``); "tuned" uses
heartbeat_timeout=3 (initialization_timeout=14). Prints one Markdown table: the survivors'
exit codes, the slowest survivor's seconds after the fault, the culprits each survivor named,
and whether any output had a SIGABRT or fatal C++ log.
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


def _tf_config_row(fault: str, victim: int, heartbeat: str, n: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        outcome = run_tf_config_job(pathlib.Path(tmp), fault, victim, heartbeat=heartbeat,
                                    n=n, limit=400)
    survivors = [i for i in range(n) if i != victim]
    codes = ",".join(str(outcome.codes[s]) for s in survivors)
    named = sorted({tuple((outcome.marker(s) or {}).get("culprits") or ()) for s in survivors})
    seconds = [outcome.ended_after.get(s) for s in survivors]
    fatal = any(_FATAL.search(outcome.stderr[i]) for i in range(n))
    slowest = (f"{max(seconds):.1f}" if all(s is not None for s in seconds)
               else "(did not end)")
    return (f"{codes} | {slowest} | {named} | {outcome.codes[victim]} | "
            f"{'yes' if fatal else 'no'}")


def _launcher_row(fault: str, victim: int, heartbeat: str, n: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        code, err, seconds = run_launcher_job(pathlib.Path(tmp), fault, victim,
                                              heartbeat=heartbeat, limit=400, n=n)
    codes = []
    named = set()
    for survivor in (i for i in range(n) if i != victim):
        found = re.search(rf"process {survivor} exited with code (\d+)", err)
        codes.append(found.group(1) if found else "-")
        markers = re.findall(rf"\[p{survivor}\] tpustrategy.fault: .*\"culprits\": \[([\d, ]*)\]", err)
        named.add(markers[-1] if markers else "-")
    report = next((line for line in err.splitlines() if line.startswith("tpustrategy.launch")),
                  "")
    first = re.search(r"tpustrategy.launch: process (\d+)", report)
    return (f"{','.join(codes)} | {seconds:.1f} (launcher) | {sorted(named)}, launcher first: "
            f"{first.group(1) if first else '-'} | launcher {code} | "
            f"{'yes' if _FATAL.search(err) else 'no'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", default="2,3,4")
    parser.add_argument("--settings", default="default,tuned")
    parser.add_argument("--faults", default="kill,stop,raise,exit,never")
    parser.add_argument("--paths", default="tf_config,launcher")
    parser.add_argument("--victims", default="all", help="process ids, or 'all' (each in turn)")
    parser.add_argument("--include-slow", action="store_true")
    args = parser.parse_args(argv)
    print("| processes | fault | victim | path | settings | survivors' exit codes | seconds to "
          "exit after the fault (slowest survivor) | named | victim / launcher code | SIGABRT "
          "or fatal log |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in map(int, args.processes.split(",")):
        victims = range(n) if args.victims == "all" else [int(v) for v in args.victims.split(",")
                                                          if int(v) < n]
        for fault in args.faults.split(","):
            for victim in victims:
                for settings in args.settings.split(","):
                    if fault == "never" and settings == "default" and not args.include_slow:
                        continue
                    for path in args.paths.split(","):
                        row = (_tf_config_row if path == "tf_config" else _launcher_row)(
                            fault, victim, SETTINGS[settings], n)
                        print(f"| {n} | {fault} | {victim} | {path} | {settings} | {row} |",
                              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
