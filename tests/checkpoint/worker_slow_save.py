"""Saves checkpoint after checkpoint of a large array until it is killed (test_atomicity.py).

Usage: ``worker_slow_save.py PREFIX``. Save ``i`` holds an array filled with
``i`` and ``step=i``; prints ``SAVED <i>`` after each save.
"""

from __future__ import annotations

import sys

import numpy as np

import tpustrategy as tps

prefix = sys.argv[1]
big = np.zeros(24 * 1024 * 1024, np.float32)  # 96 MiB: a save takes a while
ckpt = tps.train.Checkpoint(big=big, step=0)
i = 0
while True:
    i += 1
    big.fill(i)
    ckpt.step = i
    ckpt.save(prefix)
    print(f"SAVED {i}", flush=True)
