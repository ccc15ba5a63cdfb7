"""Each cluster test starts from a clean environment and a fresh ``tps.initialize``."""

from __future__ import annotations

import os

import pytest

from tpustrategy._src.cluster import initialize as init_module

_PREFIXES = ("TPS_COORDINATOR", "TPS_NUM_PROCESSES", "TPS_PROCESS_ID", "TF_CONFIG", "TPU_",
             "KUBE_GOOGLE_CLOUD_TPU", "SLURM_", "JAX_COORDINATOR")


@pytest.fixture(autouse=True)
def clean_cluster_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith(_PREFIXES):
            monkeypatch.delenv(key)
    # initialize() edits XLA_FLAGS and the proxies; monkeypatch restores them afterwards.
    monkeypatch.setenv("XLA_FLAGS", os.environ.get("XLA_FLAGS", ""))
    init_module._reset_for_tests()
    yield
    init_module._reset_for_tests()
