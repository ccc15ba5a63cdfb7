#!/usr/bin/env bash
# One prepared command for whatever accelerator JAX finds (or this machine's CPU): the main job
# (the demo) and the one-device rows against plain jax.jit, printed as one table, in at most
# about 5 minutes. Run from anywhere; writes its files to $OUT (default: bench_results/device).
#
#   benchmarks/device_check.sh                       # with the Python on PATH
#   PYTHON=.venv/bin/python benchmarks/device_check.sh
#
# On an accelerator image whose JAX is already installed (Python 3.12 with JAX and CUDA, no
# Keras): the library is installed beside that JAX without touching it (--no-deps), with
# google-crc32c, protobuf and tqdm from wheels/ when the machine cannot reach an index
# (put them there with: pip download --only-binary=:all: --python-version 3.12 -d wheels
# google-crc32c protobuf tqdm scikit-learn keras namex optree).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
OUT="${OUT:-bench_results/device}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

if ! "$PY" -c "import tpustrategy" 2>/dev/null; then
    if [ -d wheels ]; then
        "$PY" -m pip install --quiet --no-index --find-links wheels google-crc32c protobuf tqdm scikit-learn || true
    fi
    "$PY" -m pip install --quiet --no-deps -e . || { echo "device_check: could not install tpustrategy"; exit 1; }
fi
"$PY" - <<'PY'
import jax
print(f"== device check: JAX {jax.__version__}, {jax.device_count()} x {jax.devices()[0].device_kind} ({jax.default_backend()}) ==")
PY

echo "== the main job (python -m tpustrategy.demo) =="
start=$(date +%s)
timeout 150 "$PY" -m tpustrategy.demo 2>&1 | tee "$OUT/demo.log" | tail -12 || echo "device_check: the demo FAILED (see $OUT/demo.log)"
echo "(demo: $(( $(date +%s) - start )) s)"

echo "== per-call cost on one device against plain jax.jit =="
timeout 180 "$PY" benchmarks/one_device.py --rounds 7 --json "$OUT/one_device.json" > "$OUT/one_device.log" 2>&1 \
    || echo "device_check: one_device.py FAILED (see $OUT/one_device.log)"
"$PY" - "$OUT/one_device.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
print(f"{'row':<92} {'ours':>9} {'jax.jit':>9} {'paired':>7}  note")
for r in rows:
    if r.get("skipped"):
        print(f"{r['name']:<92} skipped ({r['skipped']})")
        continue
    print(f"{r['name']:<92} {r['ours']:>9.1f} {r['baseline']:>9.1f} {r['paired_ratio']:>7.3f}  {r['note']}")
PY
