"""Worker of test_multi_worker_tutorial.py: tensorflow/docs' multi-worker Keras tutorial, renamed.

``tf.distribute.MultiWorkerMirroredStrategy`` -> ``tps.MultiWorkerMirroredStrategy``, ``tf.data``
-> ``tpustrategy.data``, ``tf.io.gfile`` -> ``shutil`` / ``os``, MNIST -> ``mnist_setup.py``'s
synthetic digits. Runs under ``TF_CONFIG`` (the tutorial's way) or under
``python -m tpustrategy.launch -n 2``. Usage::

    worker_multi_worker_tutorial.py tutorial OUT      # fit, model.save on chief / non-chief
    worker_multi_worker_tutorial.py backup PHASE OUT SAVE_FREQ   # BackupAndRestore, PHASE = interrupt|resume

Prints ``RESULT <json>`` (history, final weights, what this worker saw on disk).
"""

from __future__ import annotations

import json
import os
import shutil
import sys

os.environ["KERAS_BACKEND"] = "jax"

import numpy as np  # noqa: E402

import tpustrategy as tps  # noqa: E402

mode, args = sys.argv[1], sys.argv[2:]

# The tutorial creates the strategy first (it joins the cluster from TF_CONFIG / the launcher).
strategy = tps.MultiWorkerMirroredStrategy()

import jax  # noqa: E402  (after the strategy joined the job)
import keras  # noqa: E402

import tpustrategy.data as tpsd  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mnist_setup  # noqa: E402  (the tutorial's own module)


def _is_chief(task_type, task_id):
    # The tutorial's rule: with only `worker` tasks, worker 0 is the chief.
    return (task_type == "worker" and task_id == 0) or task_type is None


def _get_temp_dir(dirpath, task_id):
    base_dirpath = "workertemp_" + str(task_id)
    temp_dir = os.path.join(dirpath, base_dirpath)
    os.makedirs(temp_dir, exist_ok=True)
    return temp_dir


def write_filepath(filepath, task_type, task_id):
    dirpath = os.path.dirname(filepath)
    base = os.path.basename(filepath)
    if not _is_chief(task_type, task_id):
        dirpath = _get_temp_dir(dirpath, task_id)
    return os.path.join(dirpath, base)


def weights(model):
    return [np.asarray(w).tolist() for w in model.get_weights()]


result: dict = {"process_index": jax.process_index(), "process_count": jax.process_count(),
                "replicas": strategy.num_replicas_in_sync}
task_type, task_id = (strategy.cluster_resolver.task_type, strategy.cluster_resolver.task_id)
result["task"] = [task_type, task_id]

if mode == "tutorial":
    out = args[0]
    per_worker_batch_size = mnist_setup.PER_WORKER_BATCH
    num_workers = jax.process_count()
    global_batch_size = per_worker_batch_size * num_workers
    multi_worker_dataset = mnist_setup.mnist_dataset(global_batch_size)
    with strategy.scope():
        # Model building/compiling need to be within `strategy.scope()`.
        multi_worker_model = mnist_setup.build_and_compile_cnn_model()
    history = multi_worker_model.fit(multi_worker_dataset, epochs=3, steps_per_epoch=mnist_setup.STEPS,
                                     verbose=0).history
    result["history"] = {k: [float(v) for v in vs] for k, vs in history.items()}
    result["weights"] = weights(multi_worker_model)

    # Model saving: the chief into the real path, the others into a temporary directory of their own.
    model_path = os.path.join(out, "keras-model", "model.keras")
    os.makedirs(os.path.dirname(model_path), exist_ok=True)
    write_model_path = write_filepath(model_path, task_type, task_id)
    multi_worker_model.save(write_model_path)
    result["saved_to"] = write_model_path
    if not _is_chief(task_type, task_id):
        shutil.rmtree(os.path.dirname(write_model_path))

    # Checkpoint saving and restoring: tps.train.Checkpoint / CheckpointManager, the same pattern.
    checkpoint_dir = os.path.join(out, "ckpt")
    checkpoint = tps.train.Checkpoint(model=multi_worker_model)
    write_checkpoint_dir = write_filepath(checkpoint_dir, task_type, task_id)
    checkpoint_manager = tps.train.CheckpointManager(checkpoint, directory=write_checkpoint_dir, max_to_keep=1)
    checkpoint_manager.save()
    if not _is_chief(task_type, task_id):
        shutil.rmtree(write_checkpoint_dir)
    latest_checkpoint = tps.train.latest_checkpoint(checkpoint_dir)
    result["latest_checkpoint"] = latest_checkpoint
    checkpoint.restore(latest_checkpoint)
    history = multi_worker_model.fit(multi_worker_dataset, epochs=2, steps_per_epoch=mnist_setup.STEPS,
                                     verbose=0).history
    result["history_after_restore"] = {k: [float(v) for v in vs] for k, vs in history.items()}

elif mode == "backup":
    phase, out, save_freq = args[0], args[1], args[2]
    save_freq = save_freq if save_freq == "epoch" else int(save_freq)
    backup_dir = os.path.join(out, "backup")            # ONE directory shared by both workers

    class InterruptingCallback(keras.callbacks.Callback):
        """The tutorial's failure: every worker stops at the same point (the job is restarted)."""

        def on_epoch_begin(self, epoch, logs=None):
            if phase == "interrupt" and epoch == mnist_setup.INTERRUPT_EPOCH:
                raise RuntimeError("Interrupting!")

    callbacks = [keras.callbacks.BackupAndRestore(backup_dir=backup_dir, save_freq=save_freq),
                 InterruptingCallback()]
    if phase == "resume":   # one ModelCheckpoint path shared by both workers too
        callbacks.append(keras.callbacks.ModelCheckpoint(os.path.join(out, "ckpt", "weights-{epoch}.weights.h5"),
                                                         save_weights_only=True))
    with strategy.scope():
        multi_worker_model = mnist_setup.build_and_compile_cnn_model()
    dataset = tpsd.Dataset.from_tensor_slices(mnist_setup.data()).batch(mnist_setup.GLOBAL_BATCH)
    try:
        history = multi_worker_model.fit(dataset, epochs=mnist_setup.EPOCHS, callbacks=callbacks,
                                         verbose=0).history
        result["history"] = {k: [float(v) for v in vs] for k, vs in history.items()}
    except RuntimeError as e:
        if "Interrupting!" not in str(e):
            raise
        result["interrupted"] = True
        result["backup_files"] = sorted(os.listdir(backup_dir)) if os.path.isdir(backup_dir) else None
    result["weights"] = weights(multi_worker_model)
    result["backup_dir_left"] = os.path.isdir(backup_dir)
else:
    raise SystemExit(f"unknown mode {mode!r}")

print("RESULT " + json.dumps(result), flush=True)
