"""The tf.data side of a benchmark: `_tf_data_worker.py` in TensorFlow's own venv, driven over pipes.

One JSON request per line (``{"case", "n", "dir"}``), one JSON answer per line
(``{"elements", "seconds"}``); ``{"case": "quit"}`` ends it.
"""

from __future__ import annotations

import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


class TFSide:
    """The tf.data worker subprocess, started with ``python`` (a venv with TensorFlow)."""

    def __init__(self, python: str):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
        self._p = subprocess.Popen([python, os.path.join(HERE, "_tf_data_worker.py")], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True, env=env)

    def run(self, case: str, n: int, data_dir: str) -> tuple[int, float]:
        """Runs ``case`` over ``n`` inputs (0: the case's own count) in ``data_dir``: (elements, seconds)."""
        assert self._p.stdin is not None and self._p.stdout is not None
        self._p.stdin.write(json.dumps({"case": case, "n": n, "dir": data_dir}) + "\n")
        self._p.stdin.flush()
        line = self._p.stdout.readline()
        if not line:
            raise RuntimeError(f"the tf.data worker exited (status {self._p.wait()}) during case {case!r}")
        out = json.loads(line)
        return int(out["elements"]), float(out["seconds"])

    def close(self) -> None:
        if self._p.poll() is None and self._p.stdin is not None:
            self._p.stdin.write(json.dumps({"case": "quit"}) + "\n")
            self._p.stdin.flush()
            try:
                self._p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._p.kill()
