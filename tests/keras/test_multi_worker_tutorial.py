"""tensorflow/docs' "Multi-worker training with Keras" tutorial on 2 processes x 4 fake CPU devices.

The tutorial's cells (``site/en/tutorials/distribute/multi_worker_with_keras.ipynb``) run in
``worker_multi_worker_tutorial.py``, renamed only: ``tf.distribute.MultiWorkerMirroredStrategy`` ->
``tps.MultiWorkerMirroredStrategy``, ``tf.data`` -> ``tpustrategy.data``; its MNIST is a small
synthetic dataset of the same kind (``mnist_setup.py``, the tutorial's file, says what differs).
Each job runs once under ``TF_CONFIG`` (the tutorial's way: two plain processes) or under
``python -m tpustrategy.launch -n 2``. Every result is compared with the same training on one
device in this process (Keras without a strategy):

- ``fit`` over the shuffled, repeated global batches with ``steps_per_epoch``;
- the chief / non-chief ``model.save`` pattern: the chief's file is the model, the non-chief's
  temporary directory is gone; the same pattern with ``tps.train.Checkpoint`` /
  ``CheckpointManager``, restored from ``latest_checkpoint`` of the chief's directory, then trained on;
- ``BackupAndRestore`` with ONE backup directory shared by both workers: an interrupted job
  restarted (a new launch, as the tutorial describes) resumes exactly as one device does, and
  with ``save_freq="epoch"`` equals an uninterrupted run; a ``ModelCheckpoint`` with one shared
  path writes the chief's files only.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tpustrategy as tps  # noqa: E402
from tests.keras.mnist_setup import (  # noqa: E402
    EPOCHS,
    GLOBAL_BATCH,
    INTERRUPT_EPOCH,
    PER_WORKER_BATCH,
    STEPS,
    build_and_compile_cnn_model,
    data,
    mnist_dataset,
)
from tests.multiprocess.harness import JobResult, clean_env, run_job, stop  # noqa: E402

pytestmark = pytest.mark.timeout(600)

HERE = pathlib.Path(__file__).parent
WORKER = "worker_multi_worker_tutorial.py"


# Jobs ----------------------------------------------------------------------------------------

def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_tf_config_job(*args: str, timeout: float = 240) -> JobResult:
    """The tutorial's way: two plain processes, each with its own TF_CONFIG (4 CPU devices each)."""
    cluster = {"worker": [f"127.0.0.1:{_free_port()}" for _ in range(2)]}
    procs = []
    for i in range(2):
        env = clean_env()
        env.update(TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}),
                   JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=4",
                   PYTHONUNBUFFERED="1")
        procs.append(subprocess.Popen([sys.executable, str(HERE / WORKER), *args], cwd=HERE.parent.parent,
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs, errs, codes = [], [], []
    deadline = time.monotonic() + timeout
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            outs.append(out)
            errs.append(err)
            codes.append(proc.returncode)
    finally:
        for proc in procs:
            stop(proc)
    stdout = "\n".join(f"[p{i}] {line}" for i, out in enumerate(outs) for line in out.splitlines())
    return JobResult(max(codes, key=abs), stdout, "\n".join(errs))


def job(how: str, *args: str) -> dict[int, dict]:
    result = (run_tf_config_job(*args) if how == "tf_config"
              else run_job(str(HERE / WORKER), *args, timeout=200))
    assert result.returncode == 0, result.stderr[-4000:]
    found = result.results()
    assert sorted(found) == [0, 1], result.stdout[-3000:] + result.stderr[-3000:]
    return found


def _assert_weights(got, model):
    want = model if isinstance(model, list) else model.get_weights()
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)


def _assert_history(got, want):
    assert set(got) == set(want), (got, want)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-5, err_msg=key)


# Tests ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["tf_config", "launcher"])
def test_tutorial_fit_and_chief_save_equal_one_device(tmp_path, how):
    results = job(how, "tutorial", str(tmp_path))

    global_batch = PER_WORKER_BATCH * 2
    reference = build_and_compile_cnn_model()
    # One device: Keras's own fit over the same pipeline (as the tutorial's single-worker cell); the
    # default strategy's scope installs the Keras support, so Keras takes a tpsd dataset in any order.
    with tps.get_strategy().scope():
        pass
    dataset = mnist_dataset(global_batch)
    want = reference.fit(dataset, epochs=3, steps_per_epoch=STEPS, verbose=0).history
    assert want["loss"][-1] < want["loss"][0]                 # it learns: the comparison means something
    trained = reference.get_weights()
    # After the checkpoint cells: 2 more epochs over the same pipeline (a new iterator of it).
    want_after = reference.fit(dataset, epochs=2, steps_per_epoch=STEPS, verbose=0).history
    for p, result in results.items():
        assert result["process_count"] == 2 and result["replicas"] == 8
        assert result["task"] == ["worker", p]
        _assert_history(result["history"], want)
        _assert_weights(result["weights"], trained)
        assert result["latest_checkpoint"] == str(tmp_path / "ckpt" / "ckpt-1")   # the chief's, for every worker
        _assert_history(result["history_after_restore"], want_after)

    # The chief saved the model where asked; the non-chief's temporary directory is gone.
    model_dir = tmp_path / "keras-model"
    assert results[0]["saved_to"] == str(model_dir / "model.keras")
    assert results[1]["saved_to"] == str(model_dir / "workertemp_1" / "model.keras")
    assert sorted(os.listdir(model_dir)) == ["model.keras"]
    loaded = keras.models.load_model(model_dir / "model.keras")
    _assert_weights([w.tolist() for w in loaded.get_weights()], trained)
    x, _ = data()
    with_trained = build_and_compile_cnn_model()
    with_trained.set_weights(trained)
    np.testing.assert_allclose(loaded.predict(x[:8], verbose=0), with_trained.predict(x[:8], verbose=0),
                               rtol=1e-5, atol=1e-5)
    assert sorted(os.listdir(tmp_path / "ckpt")) == ["checkpoint", "ckpt-1"]   # no workertemp_1 left


class _Interrupt(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        if epoch == INTERRUPT_EPOCH:
            raise RuntimeError("Interrupting!")


def _one_device_backup_run(backup_dir, save_freq):
    """The same interrupted and resumed training with Keras on one device."""
    x, y = data()
    callbacks = [keras.callbacks.BackupAndRestore(backup_dir=str(backup_dir), save_freq=save_freq)]
    model = build_and_compile_cnn_model()
    with pytest.raises(RuntimeError, match="Interrupting!"):
        model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=EPOCHS, shuffle=False, verbose=0,
                  callbacks=[*callbacks, _Interrupt()])
    model = build_and_compile_cnn_model()
    history = model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=EPOCHS, shuffle=False, verbose=0,
                        callbacks=callbacks).history
    return history, model


@pytest.mark.parametrize("save_freq", ["epoch", "3"])
def test_backup_and_restore_with_one_shared_dir_resumes_as_one_device(tmp_path, save_freq):
    freq = save_freq if save_freq == "epoch" else int(save_freq)
    interrupted = job("launcher", "backup", "interrupt", str(tmp_path), save_freq)
    for result in interrupted.values():
        assert result["interrupted"]
        # Only the chief wrote the shared directory: Keras's two files, nothing of the other worker's.
        assert result["backup_files"] == ["latest.weights.h5", "training_metadata.json"]
    metadata = json.loads((tmp_path / "backup" / "training_metadata.json").read_text())

    resumed = job("launcher", "backup", "resume", str(tmp_path), save_freq)
    want_history, want_model = _one_device_backup_run(tmp_path / "one_device", freq)
    for result in resumed.values():
        _assert_history(result["history"], want_history)
        _assert_weights(result["weights"], want_model)
    # ModelCheckpoint with one shared path in the resumed run: the chief's files only, the final one the model.
    saved = sorted(os.listdir(tmp_path / "ckpt"))
    assert saved == [f"weights-{e}.weights.h5" for e in range(metadata["epoch"] + 1, EPOCHS + 1)]
    final = build_and_compile_cnn_model()
    final.load_weights(tmp_path / "ckpt" / saved[-1])
    _assert_weights(resumed[0]["weights"], final)

    assert not resumed[0]["backup_dir_left"]                # the chief deleted it at the end of the resumed fit
    assert not (tmp_path / "backup").exists()

    if save_freq == "epoch":
        assert metadata["epoch"] == INTERRUPT_EPOCH
        # Interrupted and resumed equals one uninterrupted run (finite dataset, same batches each epoch).
        x, y = data()
        model = build_and_compile_cnn_model()
        full = model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=EPOCHS, shuffle=False, verbose=0).history
        assert len(want_history["loss"]) == EPOCHS - INTERRUPT_EPOCH
        _assert_history(want_history, {k: v[INTERRUPT_EPOCH:] for k, v in full.items()})
        for result in resumed.values():
            _assert_weights(result["weights"], model)
