"""Where ``fit``'s time goes: our ``fit`` under a strategy vs Keras's own ``DataParallel`` fit.

Not a benchmark row (``run_all.py`` skips ``_*.py``): a diagnostic to run by hand,
``.venv/bin/python benchmarks/_profile_fit.py [--rounds R] [--cprofile N]``.

The model, data and calls are ``keras_fit.py``'s (fit of 16 steps, 4 calls per
measurement). Three views, every side interleaved round by round:

1. wall time per step of the whole measurement (the benchmark's row);
2. accumulated wall time per step inside each phase of Keras's epoch loop, by
   timers wrapped around the functions the loop calls (the same wrappers on both
   sides): making the epoch iterator and data adapter, the symbolic build, the
   callbacks, fetching and placing each batch (``next`` on the epoch iterator's
   batch iterator), the train function (dispatch; ours also waits there for the
   in-flight bound, ``dispatch.wait``), the state sync at the end, and our entry
   wrapper (``model_strategy`` and ``install_functions``); "rest" is the wall time
   not in any phase;
3. each per-``fit``-call piece of Keras's loop alone (the state read at the
   first step, the state sync at the end, the metrics' reset and results), on
   both sides' models, waited on;
4. the device programs alone: Keras's ``train_step`` jitted as Keras jits it, for
   each side's model under its own distribution, on one batch already on the
   devices (synchronised and pipelined); equal times mean the difference is on
   the host.

``--cprofile N`` adds a cProfile of N measurements of each side (top functions by
own time; slower, for finding the exact lines). ``--tiny`` swaps in a model of
almost no compute, so the host's cost per step is what is left (on fake CPU
devices the "device" is the same cores, and a phase that waits for a step, such
as the callbacks' or the metrics' read, otherwise counts that step's compute).
``--in-flight N`` is a what-if for the library's bound on programs in flight.
"""

from __future__ import annotations

import collections
import cProfile
import functools
import io
import os
import pstats
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

_common.setup_devices(8)
os.environ["KERAS_BACKEND"] = "jax"

import jax  # noqa: E402
import keras_fit  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import tpustrategy as tps  # noqa: E402

TIMES: dict[str, float] = collections.defaultdict(float)
_depth = [0]


def timed_function(name: str, fn: Any) -> Any:
    """``fn`` with its wall time added to ``TIMES[name]`` (outermost timed call only)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _depth[0]:
            return fn(*args, **kwargs)
        _depth[0] += 1
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            TIMES[name] += time.perf_counter() - t0
            _depth[0] -= 1
    return wrapper


class TimedIterator:
    """Times every ``next`` of the batch iterator (fetch from the pipeline + placement on the devices)."""

    def __init__(self, it: Any):
        self._it = iter(it)

    def __iter__(self) -> TimedIterator:
        return self

    def __next__(self) -> Any:
        t0 = time.perf_counter()
        try:
            return next(self._it)
        finally:
            TIMES["data: next batch (fetch + device_put)"] += time.perf_counter() - t0


def instrument(models: dict[str, Any]) -> None:
    """Wraps the phases of Keras's epoch loop (and ours) with timers, on both sides alike."""
    from keras.src.backend.jax import trainer as jax_trainer
    from keras.src.callbacks import callback_list
    from keras.src.trainers import data_adapters

    from tpustrategy._src.execution import dispatch
    from tpustrategy._src.keras import steps, trainer

    it_cls, cb_cls = jax_trainer.JAXEpochIterator, callback_list.CallbackList
    original_get_iterator = it_cls._get_iterator

    def _get_iterator(self: Any) -> Any:
        return TimedIterator(original_get_iterator(self))

    it_cls._get_iterator = _get_iterator
    it_cls.__init__ = timed_function("setup: epoch iterator + data adapter", it_cls.__init__)
    data_adapters.get_data_adapter = timed_function("setup: epoch iterator + data adapter",
                                                    data_adapters.get_data_adapter)
    cb_cls.__init__ = timed_function("setup: CallbackList", cb_cls.__init__)
    for hook in ("on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end",
                 "on_train_batch_begin", "on_train_batch_end"):
        setattr(cb_cls, hook, timed_function("callbacks", getattr(cb_cls, hook)))
    trainer_cls = jax_trainer.JAXTrainer
    trainer_cls._symbolic_build = timed_function("setup: _symbolic_build", trainer_cls._symbolic_build)
    trainer_cls.jax_state_sync = timed_function("state: jax_state_sync", trainer_cls.jax_state_sync)
    trainer_cls._get_jax_state = timed_function("state: _get_jax_state", trainer_cls._get_jax_state)
    trainer_cls.reset_metrics = timed_function("metrics: reset / results", trainer_cls.reset_metrics)
    trainer_cls._get_metrics_result_or_logs = timed_function("metrics: reset / results",
                                                             trainer_cls._get_metrics_result_or_logs)
    trainer.model_strategy = timed_function("ours: model_strategy (entry wrapper)", trainer.model_strategy)
    steps.install_functions = timed_function("ours: install_functions", steps.install_functions)
    original_wait = dispatch.wait

    def wait(arr: Any) -> None:
        t0 = time.perf_counter()
        try:
            original_wait(arr)
        finally:
            TIMES["ours: dispatch.wait (in-flight bound), inside train function"] += time.perf_counter() - t0

    dispatch.wait = wait
    for model in models.values():
        model.train_function = timed_function("train function (dispatch; data excluded)", model.train_function)


def timed_side(fn: Any, steps: int) -> tuple[float, dict[str, float]]:
    TIMES.clear()
    t0 = time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    phases = dict(TIMES)
    # the batch fetch happens inside the train function (Keras's iterator_step calls next()).
    name = "train function (dispatch; data excluded)"
    if name in phases:
        phases[name] -= phases.get("data: next batch (fetch + device_put)", 0.0)
    phases["rest (fit's own loop, the final wait)"] = wall - sum(
        v for k, v in phases.items() if not k.startswith("ours: dispatch.wait"))
    return wall / steps, {k: v / steps for k, v in phases.items()}


def bare_programs(keras: Any, strategy: Any, models: dict[str, Any], x: Any, y: Any) -> dict[str, Any]:
    """Keras's train step jitted as Keras does (donated state, state shardings), per side, data on device."""
    from tpustrategy._src.keras import distribution

    dp = keras.distribution.DataParallel(devices=jax.devices())  # as keras_fit's: the same devices

    scopes = {"fit": distribution.for_strategy(strategy).scope, "keras_dp": dp.scope}
    split = NamedSharding(strategy.mesh, P("replica"))
    batch = (jax.device_put(x[:keras_fit.GLOBAL_BATCH], split), jax.device_put(y[:keras_fit.GLOBAL_BATCH], split))
    out = {}
    for name in ("fit", "keras_dp"):
        model = models[name]
        with scopes[name]():
            state = model._get_jax_state(trainable_variables=True, non_trainable_variables=True,
                                         optimizer_variables=True, metrics_variables=True)
            state = jax.tree.map(lambda a: a.copy(), state)  # the model keeps its own arrays
            step = jax.jit(model.train_step, donate_argnums=0, out_shardings=(None, model._get_state_sharding_spec()))
        holder = {"state": state}

        def call(step=step, holder=holder) -> Any:
            logs, holder["state"] = step(holder["state"], batch)
            return logs

        out[name] = call
    return out


def fixed_costs(keras: Any, strategy: Any, models: dict[str, Any], rounds: int, reps: int = 10) -> None:
    """Each per-``fit``-call piece of Keras's loop alone, ours vs DataParallel's model (ms per call, waited on)."""
    from tpustrategy._src.keras import distribution

    scopes = {"fit": distribution.for_strategy(strategy).scope,
              "keras_dp": keras.distribution.DataParallel(devices=jax.devices()).scope}
    everything = {"trainable_variables": True, "non_trainable_variables": True, "optimizer_variables": True,
                  "metrics_variables": True}

    def pieces(model: Any) -> dict[str, Any]:
        def get_state() -> Any:
            return model._get_jax_state(**everything)

        def state_sync() -> Any:
            values = get_state()   # hand the current values back, as fit's end does with the last step's
            model._jax_state = dict(zip(everything, values))
            model._jax_state_synced = False
            model.jax_state_sync()
            return [v.value for v in model.trainable_variables]

        def reset() -> Any:
            model.reset_metrics()
            return [v.value for v in model.metrics_variables]

        def results() -> Any:
            return jax.tree.leaves(model._get_metrics_result_or_logs({}))

        return {"_get_jax_state (fit's first step)": get_state,
                "_get_jax_state + jax_state_sync (fit's end)": state_sync,
                "reset_metrics (each epoch's start)": reset,
                "metrics' results (each epoch's end)": results}

    cases = {}
    for side in ("fit", "keras_dp"):
        for name, fn in pieces(models[side]).items():
            def call(fn: Any = fn, scope: Any = scopes[side]) -> float:
                with scope():
                    return _common.timed_sync(fn, reps) * 1e3
            cases[(side, name)] = call
    for fn in cases.values():
        fn()
    res = _common.side_by_side(cases, rounds)
    print(f"\nper-fit-call pieces alone (ms per call, each waited on; medians of {rounds} interleaved rounds):")
    print(f"  {'piece':<48} {'fit':>8} {'keras_dp':>9} {'diff':>8}")
    for name in pieces(models["fit"]):
        a, b = statistics.median(res[("fit", name)]), statistics.median(res[("keras_dp", name)])
        print(f"  {name:<48} {a:8.3f} {b:9.3f} {a - b:+8.3f}")


def main() -> None:
    p = _common.parser(__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--cprofile", type=int, default=0, metavar="N")
    p.add_argument("--tiny", action="store_true",
                   help="a model of almost no compute (8 -> 16 -> 2, batch 64): the host's cost per step alone")
    p.add_argument("--in-flight", type=int, metavar="N",
                   help="what-if: the library's bound on programs in flight (TPS_MAX_IN_FLIGHT; 4 on CPU)")
    args = p.parse_args()
    import keras

    if args.tiny:
        keras_fit.SIZES, keras_fit.GLOBAL_BATCH = (8, 16, 2), 64
    if args.in_flight:
        from tpustrategy._src.execution import dispatch

        dispatch._limit = args.in_flight

    strategy = tps.MirroredStrategy()
    keras.utils.set_random_seed(0)
    weights = keras_fit.create_model(keras).get_weights()
    x, y = keras_fit.data()
    fits, models = keras_fit.fit_cases(keras, strategy, weights, x, y)
    fits = {k: fits[k] for k in ("fit", "keras_dp")}
    for fn in fits.values():
        fn()
    instrument({k: models[k] for k in fits})
    steps = keras_fit.S * keras_fit.CALLS
    per_step: dict[str, list[float]] = {k: [] for k in fits}
    phases: dict[str, dict[str, list[float]]] = {k: collections.defaultdict(list) for k in fits}

    def measure(name: str) -> float:
        wall, ph = timed_side(fits[name], steps)
        per_step[name].append(wall)
        for k, v in ph.items():
            phases[name][k].append(v)
        return wall

    _common.side_by_side({k: (lambda k=k: measure(k)) for k in fits}, args.rounds)
    print(f"wall per step (median of {args.rounds} interleaved rounds of {steps} steps):")
    for k in fits:
        print(f"  {k:<9} {statistics.median(per_step[k]) * 1e3:8.3f} ms/step")
    ratios = [a / b for a, b in zip(per_step["fit"], per_step["keras_dp"])]
    print(f"  paired time ratio fit / DataParallel: {statistics.median(ratios):.3f} "
          f"[{min(ratios):.3f}..{max(ratios):.3f}] (steps/s ratio = 1 / this)")
    print("\nper-step time in each phase (ms/step, medians; a phase inside another is not subtracted twice):")
    names = sorted(set(phases["fit"]) | set(phases["keras_dp"]))
    print(f"  {'phase':<66} {'fit':>8} {'keras_dp':>9} {'diff':>8}")
    for n in names:
        a = statistics.median(phases["fit"].get(n, [0.0])) * 1e3
        b = statistics.median(phases["keras_dp"].get(n, [0.0])) * 1e3
        print(f"  {n:<66} {a:8.3f} {b:9.3f} {a - b:+8.3f}")

    fixed_costs(keras, strategy, models, args.rounds)
    programs = bare_programs(keras, strategy, models, x, y)
    for fn in programs.values():
        _common.timed_sync(fn, 3)
    for mode, timed in (("synchronised", _common.timed_sync), ("pipelined", _common.timed_pipelined)):
        res = _common.side_by_side({k: (lambda fn=fn, timed=timed: timed(fn, 16)) for k, fn in programs.items()},
                                   args.rounds)
        pr = [a / b for a, b in zip(res["fit"], res["keras_dp"])]
        print(f"\nbare train_step program, {mode}: fit's {statistics.median(res['fit']) * 1e3:.3f} ms, "
              f"DataParallel's {statistics.median(res['keras_dp']) * 1e3:.3f} ms, paired ratio "
              f"{statistics.median(pr):.3f} [{min(pr):.3f}..{max(pr):.3f}]")

    for k in fits if args.cprofile else ():
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.cprofile):
            fits[k]()
        prof.disable()
        for order, restriction in (("tottime", ()), ("cumulative", ("tpustrategy",))):
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats(order).print_stats(*restriction, 30)
            where = f", {restriction[0]} only" if restriction else ""
            print(f"\n=== cProfile, {k}, {args.cprofile} measurements of {steps} steps (by {order}{where}) ===")
            print("\n".join(line for line in s.getvalue().splitlines()[6:] if line.strip()))


if __name__ == "__main__":
    main()
