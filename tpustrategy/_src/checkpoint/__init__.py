"""Checkpoints of variables, arrays and input positions; preemption handling (``tps.train``)."""
