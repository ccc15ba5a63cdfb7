"""Writes the same checkpoint path again and again until it is killed (test_crash_safety.py).

Usage: ``worker_overwrite.py PATH``. Write ``i`` holds an array filled with
``i`` and ``step=i``; prints ``WROTE <i>`` after each write.
"""

from __future__ import annotations

import sys

import numpy as np

import tpustrategy as tps

path = sys.argv[1]
big = np.zeros(4 * 1024 * 1024, np.float32)  # 16 MiB
ckpt = tps.train.Checkpoint(big=big, step=0)
i = 0
while True:
    i += 1
    big.fill(i)
    ckpt.step = i
    ckpt.write(path)
    print(f"WROTE {i}", flush=True)
