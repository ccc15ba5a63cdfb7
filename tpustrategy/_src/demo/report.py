"""The demo's output: a progress bar that behaves in logs, a summary, a plot."""

from __future__ import annotations

import sys
import time
from typing import Any


class Progress:
    """A tqdm bar on a terminal; one line per epoch in a non-interactive log."""

    def __init__(self, total: int, enabled: bool = True):
        self._enabled = enabled
        self._tty = sys.stdout.isatty()
        self._bar = None
        self._epoch_start = time.perf_counter()
        self._epoch_steps = 0
        self._first_epoch = True
        if enabled and self._tty:
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit="step", dynamic_ncols=True, file=sys.stdout)

    def update(self, steps: int, *, loss: float, epoch: int) -> None:
        self._epoch_steps += steps
        if self._bar is not None:
            self._bar.set_postfix(epoch=epoch, loss=f"{loss:.4f}", refresh=False)
            self._bar.update(steps)

    def epoch_end(self, epoch: int, mean_loss: float) -> None:
        if not self._enabled:
            return
        now = time.perf_counter()
        rate = self._epoch_steps / max(now - self._epoch_start, 1e-9)
        self._epoch_start, self._epoch_steps = now, 0
        note = "  (includes compiling the step)" if self._first_epoch else ""
        self._first_epoch = False
        line = f"epoch {epoch:3d}  mean loss {mean_loss:.4f}  {rate:6.1f} steps/s{note}"
        if self._bar is not None:
            self._bar.write(line)
        else:
            print(line, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def summary(rows: dict[str, Any]) -> None:
    width = max(len(k) for k in rows)
    print("\n" + "=" * 60)
    print("tpustrategy demo: data-parallel training on handwritten digits")
    print("-" * 60)
    for k, v in rows.items():
        print(f"{k:<{width}}  {v}")
    print("=" * 60, flush=True)


def plot_curve(losses: list[float], steps_per_epoch: int, path: str) -> str:
    """Writes the training-loss curve to ``path`` (PNG); returns the path or why not."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "(matplotlib not installed: no plot)"
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    ax.plot(range(1, len(losses) + 1), losses, lw=1.2, label="training loss (mean over replicas)")
    for e in range(steps_per_epoch, len(losses), steps_per_epoch):
        ax.axvline(e, color="0.85", lw=0.6, zorder=0)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy")
    ax.set_yscale("log")
    ax.set_title("tpustrategy demo: digits, data-parallel training")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
