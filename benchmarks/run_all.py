"""Runs every benchmark script and prints one table (what ``make bench`` runs).

Each ``benchmarks/*.py`` script (but the private ``_*.py`` helpers and this one) runs in its own
subprocess with ``--json FILE`` (and ``--quick`` when given here), under a
per-script timeout. ``--tf-python PATH`` (default: ``/tmp/tfvenv/bin/python``
when it exists) is passed to the scripts that accept it, for their TensorFlow
rows. The rows of all scripts are printed as one table under a header (date,
machine, JAX version, device count) and written to ``bench_results/latest.json``
and ``bench_results/latest.md``; each script's output goes to
``bench_results/logs/SCRIPT.log``.

A row a script could not measure because an optional dependency is missing
(TensorFlow, optax) says "skipped (reason)". Anything else that goes wrong — a
script that exits non-zero, times out, or writes no usable rows (a row without
numbers that is not marked skipped) — becomes a FAILED row, the other scripts
still run, and this command exits with status 1 after naming the failed scripts.

Columns: medians of each side's rounds; spread = (max - min) / median of a side's
rounds; ratio = ours / baseline of the medians; paired = the median of the
per-round ratios ours / baseline (the sides run interleaved, so each round's ratio
sees the same machine load; on a shared machine this is the figure to quote), with
their interquartile range and min..max; "-" where the baseline ran in another
process. See each row's unit for which way is better.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(ROOT, "bench_results")
DEFAULT_TF_PYTHON = "/tmp/tfvenv/bin/python"
COLUMNS = ("benchmark", "ours", "spread", "baseline", "spread", "ratio", "paired", "paired IQR", "paired range",
           "unit", "note")
NUMERIC = {1, 2, 3, 4, 5, 6, 7, 8}


def scripts() -> list[str]:
    # Private helper modules (``_common.py``, ``_mlp.py``) are not benchmarks.
    return sorted(f for f in os.listdir(HERE)
                  if f.endswith(".py") and not f.startswith("_") and f != os.path.basename(__file__))


def accepts(script: str, flag: str) -> bool:
    """Whether the script's argparse declares ``flag`` (read from its source: no JAX start-up)."""
    with open(os.path.join(HERE, script)) as f:
        source = f.read()
    return f'"{flag}"' in source or (flag in ("--json", "--quick") and "_common.parser(" in source)


def command(script: str, json_path: str, quick: bool, tf_python: str | None) -> list[str]:
    cmd = [sys.executable, os.path.join(HERE, script), "--json", json_path]
    if quick and accepts(script, "--quick"):
        cmd.append("--quick")
    if tf_python and accepts(script, "--tf-python"):
        cmd += ["--tf-python", tf_python]
    return cmd


def run_script(script: str, quick: bool, tf_python: str | None, timeout: float,
               env: dict[str, str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Runs one script; its normalised rows (or one error row) and a status record."""
    os.makedirs(os.path.join(RESULTS, "logs"), exist_ok=True)
    log_path = os.path.join(RESULTS, "logs", script.removesuffix(".py") + ".log")
    with tempfile.TemporaryDirectory() as tmp:
        json_path = os.path.join(tmp, "rows.json")
        cmd = command(script, json_path, quick, tf_python)
        t0 = time.perf_counter()
        error = None
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
            out, err = proc.stdout, proc.stderr
            if proc.returncode:
                error = f"exit status {proc.returncode}: {_last_line(err or out)}"
        except subprocess.TimeoutExpired as e:
            out, err = _text(e.stdout), _text(e.stderr)
            error = f"timed out after {timeout:.0f} s"
        wall = time.perf_counter() - t0
        with open(log_path, "w") as f:
            f.write(f"$ {' '.join(cmd)}\n# {wall:.1f} s\n--- stdout\n{out}\n--- stderr\n{err}\n")
        rows: list[dict[str, Any]] = []
        if error is None:
            try:
                with open(json_path) as f:
                    rows = [normalise(script, r) for r in json.load(f)]
                if not rows:
                    raise ValueError("the script wrote no rows")
            except (OSError, ValueError, KeyError, TypeError) as e:
                error = f"no usable --json rows ({type(e).__name__}: {e})"
                rows = []
    status = {"script": script, "command": cmd, "wall_s": wall, "ok": error is None, "error": error,
              "rows": len(rows), "skipped": sum(1 for r in rows if r["skipped"]),
              "log": os.path.relpath(log_path, ROOT)}
    if error is not None:
        rows = [{"script": script, "name": f"FAILED: {error}", "ours": None, "ours_spread": None,
                 "baseline": None, "baseline_spread": None, "ratio": None, "paired_ratio": None,
                 "paired_ratio_spread": None, "paired_ratio_iqr": None, "unit": "", "higher_is_better": False,
                 "note": f"see {status['log']}", "skipped": None, "error": True}]
    return rows, status


def normalise(script: str, r: dict[str, Any]) -> dict[str, Any]:
    """One row of ``_common.row`` / ``_common.skipped_row``, spreads made relative.

    Raises ``ValueError`` for a row without numbers that is not marked skipped.
    """
    def rel(spread: Any, median: Any) -> float | None:
        if spread is None or not median:
            return None
        return (spread[1] - spread[0]) / median

    skipped = r.get("skipped")
    ours, base, ratio = r.get("ours"), r.get("baseline"), r.get("ratio")
    if not skipped:
        for key, value in (("ours", ours), ("baseline", base), ("ratio", ratio)):
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"row {r['name']!r} has {key}={value!r} and is not marked skipped")
    return {
        "script": script,
        "name": r["name"],
        "ours": ours,
        "ours_spread": rel(r.get("ours_spread"), ours),
        "baseline": base,
        "baseline_spread": rel(r.get("baseline_spread"), base),
        "ratio": ratio,
        "paired_ratio": r.get("paired_ratio"),
        "paired_ratio_spread": r.get("paired_ratio_spread"),
        "paired_ratio_iqr": r.get("paired_ratio_iqr"),
        "rounds": r.get("rounds"),
        "unit": r.get("unit", ""),
        "higher_is_better": bool(r.get("higher_is_better", False)),
        "note": r.get("note") or "",
        "skipped": skipped,
        "error": False,
    }


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count()}


def device_info(env: dict[str, str]) -> str:
    """What the scripts see (they ask for 8 fake CPU devices when there is no accelerator)."""
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import _common; _common.setup_devices(8); "
             "import jax; d = jax.devices(); print(f'{len(d)} x {d[0].platform} ({d[0].device_kind})')")
    try:
        proc = subprocess.run([sys.executable, "-c", probe, HERE], capture_output=True, text=True,
                              timeout=120, env=env)
        return proc.stdout.strip() or f"unknown ({_last_line(proc.stderr)})"
    except subprocess.TimeoutExpired:
        return "unknown (probe timed out)"


def _text(x: Any) -> str:
    return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "(no output)"


def _num(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return _common._fmt(x)


def _pct(x: Any) -> str:
    return "-" if x is None else f"{x * 100:.0f}%"


def cells(r: dict[str, Any]) -> list[str]:
    unit = r["unit"] + (" (higher better)" if r["higher_is_better"] else "")
    ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
    paired = iqr = full = "-"
    if r.get("paired_ratio") is not None:
        paired = f"{r['paired_ratio']:.3f}"
        iqr = "{:.2f}..{:.2f}".format(*r["paired_ratio_iqr"])
        full = "{:.2f}..{:.2f}".format(*r["paired_ratio_spread"])
    return [f"{r['script'].removesuffix('.py')}: {r['name'].strip()}", _num(r["ours"]), _pct(r["ours_spread"]),
            _num(r["baseline"]), _pct(r["baseline_spread"]), ratio, paired, iqr, full, unit, r["note"]]


def header_lines(meta: dict[str, Any]) -> list[str]:
    return [
        f"date: {meta['date']}",
        f"machine: {meta['machine']['cpu']}, {meta['machine']['cores']} cores; python {meta['python']}",
        f"jax {meta['jax']}, devices: {meta['devices']}",
        f"mode: {'quick' if meta['quick'] else 'default'}; tf python: {meta['tf_python'] or 'none'}; "
        f"total {meta['total_s']:.0f} s ({', '.join(f'{s}: {t:.0f} s' for s, t in meta['script_s'].items())})",
        "spread = (max - min) / median of a side's rounds; ratio = ours / baseline (medians); "
        "paired = median of the per-round ratios ours / baseline (sides interleaved in each round), "
        "with their interquartile range and min..max",
    ]


def text_table(rows: list[dict[str, Any]]) -> str:
    table = [list(COLUMNS)] + [cells(r) for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS) - 1)]
    right = NUMERIC
    out = []
    for k, line in enumerate(table):
        parts = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths))]
        out.append("  ".join(parts + [line[-1]]).rstrip())
        if k == 0:
            out.append("-" * len(out[0]))
    return "\n".join(out)


def markdown(meta: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    lines = ["# Benchmark results", ""] + [f"- {h}" for h in header_lines(meta)] + [""]
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("|" + "|".join("---:" if i in NUMERIC else "---" for i in range(len(COLUMNS))) + "|")
    for r in rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells(r)) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = _common.parser(__doc__.splitlines()[0])
    p.add_argument("--tf-python", metavar="PATH",
                   help=f"a Python with TensorFlow for the scripts that take it (default: {DEFAULT_TF_PYTHON} if present)")
    p.add_argument("--timeout", type=float, metavar="S", help="per-script timeout (default 420 s, 240 s with --quick)")
    p.add_argument("--only", nargs="+", metavar="SCRIPT", help="run only these scripts (names as in benchmarks/)")
    args = p.parse_args()
    tf_python = args.tf_python or (DEFAULT_TF_PYTHON if os.access(DEFAULT_TF_PYTHON, os.X_OK) else None)
    timeout = args.timeout or (240.0 if args.quick else 420.0)
    todo = scripts()
    if args.only:
        wanted = {s if s.endswith(".py") else s + ".py" for s in args.only}
        unknown = wanted - set(todo)
        if unknown:
            p.error(f"--only: no such benchmark script(s) {sorted(unknown)}. Available: {todo}")
        todo = [s for s in todo if s in wanted]
    env = dict(os.environ)
    t_start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    statuses = []
    for i, script in enumerate(todo, 1):
        print(f"[{i}/{len(todo)}] {script} ...", end=" ", flush=True)
        script_rows, status = run_script(script, args.quick, tf_python, timeout, env)
        rows += script_rows
        statuses.append(status)
        skipped = f", {status['skipped']} skipped" if status.get("skipped") else ""
        outcome = f"{status['rows']} rows{skipped}" if status["ok"] else f"FAILED: {status['error']}"
        print(f"{outcome} ({status['wall_s']:.1f} s)", flush=True)
    meta = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine(),
        "python": platform.python_version(),
        "jax": metadata.version("jax"),
        "devices": device_info(env),
        "quick": args.quick,
        "tf_python": tf_python,
        "total_s": time.perf_counter() - t_start,
        "script_s": {s["script"]: s["wall_s"] for s in statuses},
    }
    print()
    print("\n".join(header_lines(meta)))
    print()
    print(text_table(rows))
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "latest.json"), "w") as f:
        json.dump({"meta": meta, "scripts": statuses, "rows": rows}, f, indent=1)
    with open(os.path.join(RESULTS, "latest.md"), "w") as f:
        f.write(markdown(meta, rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print(f"\nwrote {os.path.relpath(RESULTS, os.getcwd())}/latest.json and latest.md")
    failed = [s for s in statuses if not s["ok"]]
    if failed:
        for s in failed:
            print(f"FAILED: {s['script']}: {s['error']} (log: {s['log']})", file=sys.stderr)
        print(f"{len(failed)} of {len(statuses)} benchmark scripts failed.", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
