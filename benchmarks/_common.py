"""Shared helpers of the benchmark scripts: waiting, timing, side-by-side rounds, rows.

Every timed call goes through ``wait`` (one helper that blocks on anything a step
returns: JAX arrays, ``tps.DistributedValues``, pytrees of them, Python numbers), in
one of two modes, the same on both sides of a row:

- synchronised (``timed_sync``): block on every step's result before the next
  call, as a training loop that logs the loss each step does;
- pipelined (``timed_pipelined``): block on the result from ``depth`` calls back,
  so at most ``depth`` + 1 programs are in flight (XLA's CPU collectives lock up
  with dozens queued; see shared/reference/jax_engine_notes.md), and wait on all
  of them before the clock stops.

``side_by_side`` interleaves the sides of a row round by round (rotating which goes
first), and ``row`` reports medians, spreads (min..max) and the paired ratio (the
median of the per-round ratios ours/baseline, robust to the machine's speed drifting
between rounds) with its interquartile range and min..max. A row whose optional dependency is missing is ``skipped_row``; any
other failure must propagate (``run_all.py`` then fails the run).
"""

from __future__ import annotations

import argparse
import collections
import json
import numbers
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

# Programs in flight in the pipelined mode (both sides). The library's own bound
# (TPS_MAX_IN_FLIGHT) is 4 on CPU; the hand-written side gets the same.
PIPELINE_DEPTH = 4


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


# Waiting ------------------------------------------------------------------------------


def wait(x: Any) -> Any:
    """Blocks until every array in ``x`` is computed; returns ``x``.

    ``x`` may be a JAX array, a ``tps.DistributedValues`` (a JAX pytree of its arrays;
    if it were ever a leaf again, its components are waited on instead), any pytree of
    those, a NumPy array or a Python number. Anything else raises ``TypeError``: a
    benchmark must never time a call whose result it cannot wait on.
    """
    import jax

    arrays: list[Any] = []
    _collect(x, arrays, jax)
    if arrays:
        jax.block_until_ready(arrays)
    return x


def _distributed_type() -> type | None:
    try:
        from tpustrategy import DistributedValues
    except ImportError:
        return None
    return DistributedValues


def _collect(x: Any, arrays: list[Any], jax: Any) -> None:
    distributed = _distributed_type()
    for leaf in jax.tree_util.tree_leaves(x):
        if isinstance(leaf, jax.core.Tracer):
            raise TypeError(f"wait: got a tracer ({leaf!r}); time calls outside any trace.")
        if isinstance(leaf, jax.Array):
            arrays.append(leaf)
        elif isinstance(leaf, (numbers.Number, str, bytes)) or type(leaf).__module__ == "numpy":
            continue  # host values are ready
        elif distributed is not None and isinstance(leaf, distributed):
            for component in leaf.values:  # not a pytree: its local components
                _collect(component, arrays, jax)
        else:
            raise TypeError(
                f"wait: cannot wait on a {type(leaf).__module__}.{type(leaf).__name__} "
                f"({leaf!r:.80}). Return arrays, DistributedValues, numbers or pytrees of them."
            )


def all_ready(x: Any) -> bool:
    """Whether every array in ``x`` is computed (for tests of ``wait``)."""
    import jax

    arrays: list[Any] = []
    _collect(x, arrays, jax)
    return all(a.is_ready() for a in arrays)


# Timing --------------------------------------------------------------------------------


def timed_loop(step: Callable[[], Any], iters: int, *, depth: int) -> float:
    """Seconds per call of ``step`` over ``iters`` calls, every result waited on.

    After call ``i`` the result of call ``i - depth`` is waited on (``depth=0``: each
    result before the next call); the clock stops after the last result is ready.
    """
    if depth < 0 or iters < 1:
        raise ValueError(f"timed_loop: need iters >= 1 and depth >= 0. Got iters={iters}, depth={depth}.")
    pending: collections.deque[Any] = collections.deque()
    t0 = time.perf_counter()
    for _ in range(iters):
        pending.append(step())
        if len(pending) > depth:
            wait(pending.popleft())
    while pending:
        wait(pending.popleft())
    return (time.perf_counter() - t0) / iters


def timed_sync(step: Callable[[], Any], iters: int) -> float:
    """Synchronised steps: each call's result is waited on before the next call."""
    return timed_loop(step, iters, depth=0)


def timed_pipelined(step: Callable[[], Any], iters: int, depth: int = PIPELINE_DEPTH) -> float:
    """Pipelined steps: the result from ``depth`` calls back is waited on after each call."""
    return timed_loop(step, iters, depth=depth)


def side_by_side(cases: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Runs each case once per round, interleaved, so machine noise hits all alike.

    Each callable returns its own measurement. The order rotates every round so no
    case always runs first (after a pause) or last.
    """
    names = list(cases)
    results: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            results[name].append(cases[name]())
    return results


# Rows ----------------------------------------------------------------------------------


def paired_ratios(ours: list[float], baseline: list[float]) -> list[float]:
    """Per-round ratios ours/baseline of two interleaved series."""
    if len(ours) != len(baseline):
        raise ValueError(f"paired_ratios: {len(ours)} rounds of ours vs {len(baseline)} of the baseline.")
    return [o / b for o, b in zip(ours, baseline)]


def quartiles(xs: list[float]) -> list[float]:
    """The first and third quartiles (both the value itself for one round)."""
    if len(xs) < 2:
        return [xs[0], xs[0]]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return [q[0], q[2]]


def row(
    name: str,
    ours: list[float],
    baseline: list[float],
    unit: str,
    *,
    higher_is_better: bool = False,
    note: str = "",
    interleaved: bool = True,
) -> dict[str, Any]:
    """One comparison: medians, spreads (min..max), the ratio of medians and the paired ratio.

    ``interleaved=False`` (the sides were not measured in the same rounds, e.g. the
    baseline ran in another process) leaves the paired ratio out.
    """
    mo, mb = statistics.median(ours), statistics.median(baseline)
    pr = paired_ratios(ours, baseline) if interleaved else None
    return {
        "name": name,
        "ours": mo,
        "ours_spread": [min(ours), max(ours)],
        "baseline": mb,
        "baseline_spread": [min(baseline), max(baseline)],
        "ratio": mo / mb if mb else float("nan"),
        "paired_ratio": statistics.median(pr) if pr else None,
        "paired_ratio_spread": [min(pr), max(pr)] if pr else None,
        "paired_ratio_iqr": quartiles(pr) if pr else None,
        "rounds": len(ours),
        "unit": unit,
        "higher_is_better": higher_is_better,
        "note": note,
        "skipped": None,
    }


def skipped_row(name: str, reason: str, unit: str = "") -> dict[str, Any]:
    """A row that could not be measured because an optional dependency is missing."""
    return {
        "name": name, "ours": None, "ours_spread": None, "baseline": None, "baseline_spread": None,
        "ratio": None, "paired_ratio": None, "paired_ratio_spread": None, "paired_ratio_iqr": None, "rounds": 0,
        "unit": unit, "higher_is_better": False, "note": f"skipped ({reason})", "skipped": reason,
    }


def optional_module(name: str) -> tuple[Any, str | None]:
    """Imports an optional dependency: (module, None), or (None, reason) when it is missing."""
    import importlib

    try:
        return importlib.import_module(name), None
    except ModuleNotFoundError as e:
        if e.name != name and not name.startswith(f"{e.name}."):
            raise  # the dependency is there but broken: a failure, not a skip
        return None, f"{name} not installed"


def skip_all(names: list[str], reason: str, json_path: str | None) -> None:
    """Writes one skipped row per planned row and exits 0 (a missing optional dependency)."""
    finish([skipped_row(n, reason) for n in names], json_path)
    sys.exit(0)


def print_rows(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        if r.get("skipped"):
            print(f"{r['name']:<58} skipped ({r['skipped']})")
            continue
        spread_o = f"[{_fmt(r['ours_spread'][0])}..{_fmt(r['ours_spread'][1])}]"
        spread_b = f"[{_fmt(r['baseline_spread'][0])}..{_fmt(r['baseline_spread'][1])}]"
        paired = "not interleaved"
        if r["paired_ratio"] is not None:
            lo, hi = r["paired_ratio_spread"]
            q1, q3 = r["paired_ratio_iqr"]
            paired = f"{r['paired_ratio']:.3f} (IQR {q1:.3f}..{q3:.3f}; range {lo:.3f}..{hi:.3f})"
        print(
            f"{r['name']:<58} ours {_fmt(r['ours']):>10} {spread_o:<22} "
            f"baseline {_fmt(r['baseline']):>10} {spread_b:<22} ratio {r['ratio']:.3f} "
            f"paired {paired} "
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
