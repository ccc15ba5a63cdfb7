"""The demo job: data-parallel training on real data read through our TFRecord pipeline.

scikit-learn's digits are written once as sharded TFRecords of
``tf.train.Example``s; the seed's input pipeline (``list_files`` ->
``interleave(TFRecordDataset)`` -> ``map(parse)`` -> ``shuffle`` -> ``batch``) is
distributed with ``experimental_distribute_dataset`` over every replica; the
model and optimizer live in mirrored variables created under
``strategy.scope()``; each training call is one ``tps.function`` program
(``run`` + ``reduce``, several steps per dispatch); the test split is evaluated
with the partial last batch padded and masked, so every test example counts
exactly once. A checkpoint is saved after every epoch; ``--resume`` continues
from the latest one with exactly the losses of an uninterrupted run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import tpustrategy as tps
from tpustrategy._src.demo import checkpointing, dataset, model, report


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tpustrategy-demo", description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--global-batch", type=int, default=128, help="examples per step over all replicas")
    p.add_argument("--steps-per-execution", type=int, default=4, help="training steps per compiled call")
    p.add_argument("--learning-rate", type=float, default=3e-3)
    p.add_argument("--cache-dir", default=os.environ.get("TPS_DEMO_CACHE", os.path.join(".tps_cache", "digits")))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-dir", default=None,
                   help="where a checkpoint is saved after each epoch (default: digits_checkpoints next to --cache-dir)")
    p.add_argument("--resume", action="store_true",
                   help="continue from the latest checkpoint in --checkpoint-dir (a larger --epochs trains on)")
    return p


def main(argv: list[str] | None = None) -> int:
    import optax

    args = _parser().parse_args(argv)
    start = time.perf_counter()
    strategy = tps.TPUStrategy()
    n = strategy.num_replicas_in_sync
    if args.global_batch < n:
        raise SystemExit(f"--global-batch {args.global_batch} must be at least the {n} replicas.")
    info = dataset.write_tfrecords(args.cache_dir, seed=args.seed)
    steps_per_epoch = info["train"] // args.global_batch
    if steps_per_epoch == 0:
        raise SystemExit(f"--global-batch {args.global_batch} is larger than the {info['train']} training examples.")
    optimizer = optax.adam(args.learning_rate)
    with strategy.scope():
        params = model.as_variables(model.init_params(args.seed))
        opt_state = model.as_variables(optimizer.init(model.init_params(args.seed)))

    def replica_step(x: jax.Array, y: jax.Array) -> jax.Array:
        ctx = tps.get_replica_context()
        p = model.read(params)
        loss, grads = jax.value_and_grad(model.cross_entropy)(p, x, y)
        grads = ctx.all_reduce("MEAN", grads)
        updates, new_state = optimizer.update(grads, model.read(opt_state), p)
        model.assign(params, optax.apply_updates(p, updates))
        model.assign(opt_state, new_state)
        return loss

    @tps.function
    def train(iterator: object, steps: int) -> jax.Array:
        losses = []
        for _ in range(steps):
            x, y = next(iterator)
            losses.append(strategy.reduce("MEAN", strategy.run(replica_step, (x, y)), axis=None))
        return jnp.stack(losses)

    def replica_eval(x: jax.Array, y: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
        pred = jnp.argmax(model.logits(model.read(params), x), axis=-1)
        return jnp.sum((pred == y) & mask), jnp.sum(mask)

    @tps.function
    def evaluate(batch: object, mask: object) -> tuple[jax.Array, jax.Array]:
        correct, count = strategy.run(replica_eval, (*batch, mask))
        return strategy.reduce("SUM", correct, axis=None), strategy.reduce("SUM", count, axis=None)

    # One pipeline over every epoch: the shuffle reshuffles each pass of repeat(). It repeats
    # forever (each epoch takes steps_per_epoch steps), so a checkpoint never holds an exhausted
    # iterator and `--resume --epochs N` can train on past the first run's last epoch.
    train_ds = dataset.train_dataset(args.cache_dir, args.global_batch, args.seed).repeat()
    iterator = iter(strategy.experimental_distribute_dataset(train_ds))
    checkpoint_dir = args.checkpoint_dir or os.path.join(
        os.path.dirname(os.path.abspath(args.cache_dir)), "digits_checkpoints")
    saver = checkpointing.EpochCheckpoints(checkpoint_dir, params=params, opt_state=opt_state,
                                           iterator=iterator)
    start_epoch = saver.start(args.resume)
    curve = saver.curve  # the whole run's losses, restored up to start_epoch
    bar = report.Progress((args.epochs - start_epoch) * steps_per_epoch, enabled=jax.process_index() == 0)
    first_call: tuple[float, int] | None = None  # (seconds, steps): compiling + first steps
    train_start = time.perf_counter()
    for epoch in range(start_epoch, args.epochs):
        done = 0
        while done < steps_per_epoch:
            k = min(args.steps_per_execution, steps_per_epoch - done)
            losses = np.asarray(train(iterator, k))
            if first_call is None:
                first_call = (time.perf_counter() - train_start, k)
            curve.extend(losses.tolist())
            done += k
            bar.update(k, loss=float(losses[-1]), epoch=epoch + 1)
        bar.epoch_end(epoch + 1, float(np.mean(curve[-steps_per_epoch:])))
        saver.save(epoch + 1)
    iterator.close()
    train_time = time.perf_counter() - train_start - sum(saver.save_seconds)
    bar.close()

    pad = tps.InputOptions(partial_batch="pad")
    correct = counted = 0
    for batch, mask in strategy.experimental_distribute_dataset(dataset.test_dataset(args.cache_dir, args.global_batch), pad):
        c, m = evaluate(batch, mask)
        correct, counted = correct + int(c), counted + int(m)
    if counted != info["test"]:
        raise RuntimeError(f"evaluation counted {counted} test examples, expected {info['test']}")
    accuracy = correct / counted
    compile_s, first_steps = first_call if first_call is not None else (0.0, 0)
    steady_steps = (args.epochs - start_epoch) * steps_per_epoch - first_steps
    examples_per_s = steady_steps * args.global_batch / max(train_time - compile_s, 1e-9)
    plot = report.plot_curve(curve, steps_per_epoch, os.path.join(os.path.dirname(os.path.abspath(args.cache_dir)), "digits_training_curve.png"))
    devices = strategy.worker_devices
    report.summary({
        "replicas": n,
        "devices": f"{len(devices)} x {devices[0].platform.upper()} ({devices[0].device_kind})",
        "train examples": f"{info['train']} ({args.epochs} epochs, global batch {args.global_batch}, {args.steps_per_execution} steps per call)",
        "test accuracy": f"{accuracy:.4f} ({correct}/{counted} test examples)",
        "throughput": f"{examples_per_s:,.0f} examples/s (after the first call, which compiles)",
        "time": f"{time.perf_counter() - start:.1f} s total, {train_time:.1f} s training "
        f"({compile_s:.1f} s first call)",
        "training curve": plot,
        "checkpoint": saver.describe(),
    })
    sys.stdout.flush()
    return 0
