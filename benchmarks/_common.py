"""Shared helpers of the benchmark scripts: side-by-side timing, tables, JSON rows."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any


def setup_devices(n: int = 8) -> None:
    """Fake CPU devices when there is no accelerator (must run before JAX starts)."""
    flag = f"--xla_force_host_platform_device_count={n}"
    if flag not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--json", metavar="PATH", help="write the rows as JSON to PATH")
    p.add_argument("--quick", action="store_true", help="fewer repetitions (smoke test)")
    return p


def side_by_side(cases: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Runs each case once per round, interleaved, so machine noise hits all alike.

    Each callable returns its own measurement (seconds per unit of work).
    """
    results: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            results[name].append(fn())
    return results


def row(
    name: str,
    ours: list[float],
    baseline: list[float],
    unit: str,
    *,
    higher_is_better: bool = False,
    note: str = "",
) -> dict[str, Any]:
    """One comparison: medians, spreads (min..max) and the ratio ours/baseline."""
    mo, mb = statistics.median(ours), statistics.median(baseline)
    return {
        "name": name,
        "ours": mo,
        "ours_spread": [min(ours), max(ours)],
        "baseline": mb,
        "baseline_spread": [min(baseline), max(baseline)],
        "ratio": mo / mb if mb else float("nan"),
        "unit": unit,
        "higher_is_better": higher_is_better,
        "note": note,
    }


def print_rows(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        spread_o = f"[{_fmt(r['ours_spread'][0])}..{_fmt(r['ours_spread'][1])}]"
        spread_b = f"[{_fmt(r['baseline_spread'][0])}..{_fmt(r['baseline_spread'][1])}]"
        print(
            f"{r['name']:<58} ours {_fmt(r['ours']):>10} {spread_o:<22} "
            f"baseline {_fmt(r['baseline']):>10} {spread_b:<22} ratio {r['ratio']:.3f} "
            f"({r['unit']}{', higher is better' if r['higher_is_better'] else ''}) {r['note']}"
        )


def _fmt(x: float) -> str:
    if x == 0 or 1e-2 <= abs(x) < 1e5:
        return f"{x:.3f}" if abs(x) < 100 else f"{x:.0f}"
    return f"{x:.3e}"


def finish(rows: list[dict[str, Any]], json_path: str | None) -> None:
    print_rows(rows)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(rows, f, indent=1)


def timed_loop(step: Callable[[], Any], iters: int, wait: Callable[[Any], None]) -> float:
    """Seconds per call of ``step`` over ``iters`` calls, waiting on the last result."""
    t0 = time.perf_counter()
    out = None
    for _ in range(iters):
        out = step()
    wait(out)
    return (time.perf_counter() - t0) / iters
