"""The API-misuse audit: plausible wrong calls of a ported TensorFlow program, each in a fresh process.

Every case is a few lines of user code that misuses the API. Each runs in its
own Python process (8 fake CPU devices, a timeout) and is classified:

- ``hang``: it did not finish within the timeout;
- ``silent``: it raised nothing (a wrong call accepted without a word), or, for
  a case that TensorFlow accepts, its own check of the result failed;
- ``ok`` / ``lacking``: it raised; the message must name the API or argument
  (``arg``), show what was received (``got``) and say how to fix it (contains
  "fix", or "did you mean"); ``lacking`` lists what is missing.

Run: ``.venv/bin/python tools/misuse_audit.py [--jobs 2] [--json out.json] [ids...]``.
The exit status is 1 when a case hangs or is silent, or more than 3 lack something.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PRELUDE = """
import os, json, sys, warnings
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax, jax.numpy as jnp, numpy as np
import tpustrategy as tps
import tpustrategy.data as tpsd
def S(n=4):
    return tps.MirroredStrategy(devices=jax.devices()[:n])
def V(value, strategy=None, **kw):
    with (strategy or S()).scope():
        return tps.Variable(value, **kw)
import tempfile
D = tempfile.mkdtemp()
"""

RUNNER = """
class CaseFailed(Exception):
    pass
def check(condition, message=""):
    if not condition:
        raise CaseFailed(message)
try:
    exec(compile(CODE, "<case>", "exec"))
except CaseFailed as e:
    print("@@" + json.dumps({"outcome": "wrong", "type": "CaseFailed", "message": str(e)}))
except BaseException as e:
    print("@@" + json.dumps({"outcome": "raised", "type": type(e).__name__, "message": str(e)}))
else:
    print("@@" + json.dumps({"outcome": "returned"}))
"""

# (id, code, arg fragment, received fragment). arg/got None: the case checks a result itself
# (TensorFlow accepts the call; ours must give the right value).
CASES: list[tuple[str, str, str | None, str | None]] = [
    # errors
    ("error_two_positional", "tps.errors.InvalidArgumentError('a', 'b')", "InvalidArgumentError", "('a', 'b')"),
    ("error_code_unknown", "tps.errors.exception_type_from_error_code(99)", "error_code", "99"),
    # strategy construction and run
    ("mirrored_bad_device_string", "tps.MirroredStrategy(devices=['/gpu:0'])", "MirroredStrategy", "gpu"),
    ("one_device_int", "tps.OneDeviceStrategy(3.5)", "OneDeviceStrategy", "3.5"),
    ("tpu_resolver_string", "tps.TPUStrategy('my-tpu')", "tpu_cluster_resolver", "my-tpu"),
    ("run_args_not_tuple", "S().run(lambda x: x, 3)", "args", "int"),
    ("run_not_callable", "S().run(3)", "fn", "3"),
    ("run_kwargs_not_dict", "S().run(lambda x: x, (1,), kwargs=[1])", "kwargs", "list"),
    ("reduce_bad_op", "S().reduce('PRODUCT', tps.PerReplica([jnp.ones(2)] * 4), axis=None)", "reduce_op", "PRODUCT"),
    ("reduce_missing_axis", "S().reduce('SUM', tps.PerReplica([jnp.ones(2)] * 4))", "axis", "axis"),
    ("reduce_axis_out_of_range", "S().reduce('SUM', tps.PerReplica([jnp.ones(2)] * 4), axis=3)", "axis", "3"),
    ("per_replica_wrong_count", "S().run(lambda x: x, (tps.PerReplica([jnp.ones(2)] * 3),))", "PerReplica", "3"),
    ("scope_of_other_strategy_in_run",
     "a, b = S(), S(2)\nwith a.scope():\n    b.run(lambda: 1)", "Strategy", "Mixing"),
    ("nested_run", "s = S()\ns.run(lambda: s.run(lambda: 1))", "cross-replica", "merge_call"),
    ("gather_bad_axis", "S().gather(tps.PerReplica([jnp.ones((2, 3))] * 4), axis=5)", "axis", "5"),
    ("experimental_local_results_of_list", "check(S().experimental_local_results([1, 2]) == ([1, 2],) * 4)", None, None),
    ("distribute_unbatched", "s = S()\nlist(s.experimental_distribute_dataset(tpsd.Dataset.range(8)))", "batch", "batch"),
    ("distribute_not_dataset", "S().experimental_distribute_dataset([1, 2, 3])", "dataset", "list"),
    ("dff_not_callable", "S().distribute_datasets_from_function(tpsd.Dataset.range(4))", "dataset_fn", "Dataset"),
    ("input_options_bad", "tps.InputOptions(experimental_replication_mode='X')", "replication_mode", "X"),
    ("run_options_bad", "tps.RunOptions(experimental_bucketizing_dynamic_shape='yes')", "bucketizing", "yes"),
    # variables
    ("assign_wrong_shape", "V(jnp.zeros(3)).assign(jnp.ones(4))", "assign", "(4,)"),
    ("assign_float_to_int", "V(jnp.int32(1)).assign(1.5)", "int32", "float"),
    ("variable_bad_sync", "V(1.0, synchronization='sometimes')", "synchronization", "sometimes"),
    ("variable_bad_aggregation", "V(1.0, aggregation='MAX')", "aggregation", "MAX"),
    # TensorFlow 2.21 accepts it (golden case var_on_read_trainable_allowed), and so do we.
    ("sync_on_read_trainable",
     "check(V(1.0, synchronization=tps.VariableSynchronization.ON_READ, trainable=True).trainable)", None, None),
    ("variable_none", "tps.Variable(None)", "initial_value", "None"),
    ("variable_string", "tps.Variable('abc')", "initial_value", "abc"),
    # tps.function
    ("function_not_callable", "tps.function(3)()", "function", "3"),
    ("function_input_signature_bad", "tps.function(lambda x: x, input_signature=5)", "input_signature", "5"),
    # data pipelines
    ("batch_zero", "tpsd.Dataset.range(4).batch(0)", "batch_size", "0"),
    ("batch_float", "tpsd.Dataset.range(4).batch(2.5)", "batch_size", "2.5"),
    ("shuffle_zero", "tpsd.Dataset.range(4).shuffle(0)", "buffer_size", "0"),
    ("take_string", "tpsd.Dataset.range(4).take('3')", "count", "3"),
    ("map_not_callable", "tpsd.Dataset.range(4).map(5)", "map_func", "5"),
    ("slices_mismatched", "tpsd.Dataset.from_tensor_slices((np.ones(3), np.ones(4)))", "from_tensor_slices", "3"),
    ("shard_index_too_big", "tpsd.Dataset.range(4).shard(2, 5)", "index", "5"),
    ("repeat_negative_two", "check([int(x) for x in tpsd.Dataset.range(2).repeat(-2).take(5)] == [0, 1, 0, 1, 0])",
     None, None),
    ("padded_batch_bad_shape", "list(tpsd.Dataset.range(3).map(lambda x: np.ones(x)).padded_batch(2, padded_shapes=[1]))",
     "padded shape", "[1]"),
    ("tfrecord_missing_file", "list(tpsd.TFRecordDataset(D + '/nope.tfrecord'))", "nope.tfrecord", "nope"),
    ("iterator_past_end", "it = iter(tpsd.Dataset.range(1))\nnext(it)\ntry:\n    next(it)\nexcept StopIteration:\n"
     "    pass\nelse:\n    check(False, 'no StopIteration')", None, None),
    ("options_bad_policy", "o = tpsd.Options()\no.experimental_distribute.auto_shard_policy = 'FILES'",
     "auto_shard_policy", "FILES"),
    # checkpoints
    ("ckpt_reserved_name", "tps.train.Checkpoint(save=1)", "save", "save"),
    ("ckpt_function_object", "tps.train.Checkpoint(fn=lambda: 1).save(D + '/c')", "fn", "function"),
    ("ckpt_dataset", "tps.train.Checkpoint(ds=tpsd.Dataset.range(3)).save(D + '/c')", "ds", "Dataset"),
    ("ckpt_save_int_prefix", "tps.train.Checkpoint(v=V(1.0)).save(3)", "file_prefix", "3"),
    ("ckpt_restore_missing", "tps.train.Checkpoint(v=V(1.0)).restore(D + '/none-1')", "restore", "none-1"),
    ("ckpt_restore_folder", "c = tps.train.Checkpoint(v=V(1.0))\nc.save(D + '/ck')\nc.restore(D)", "restore", "folder"),
    ("ckpt_restore_other_shape",
     "p = tps.train.Checkpoint(v=V(jnp.zeros(3))).save(D + '/c')\ntps.train.Checkpoint(v=V(jnp.zeros(4))).restore(p)",
     "'v'", "(4,)"),
    ("ckpt_assert_consumed_partial",
     "p = tps.train.Checkpoint(a=V(1.0), b=V(2.0)).save(D + '/c')\n"
     "tps.train.Checkpoint(a=V(0.0)).restore(p).assert_consumed()", "Unresolved objects", "'b'"),
    ("ckpt_deferred_wrong_shape",
     "p = tps.train.Checkpoint(k=V(jnp.zeros(3))).save(D + '/c')\nc = tps.train.Checkpoint()\n"
     "c.restore(p)\nc.k = V(jnp.zeros(2))", "'k'", "(2,)"),
    ("ckpt_read_like_list", "p = tps.train.Checkpoint(v=V(1.0)).save(D + '/c')\ntps.train.Checkpoint().read(p, like=[1])",
     "like", "list"),
    ("ckpt_deferred_append_restores",
     "c = tps.train.Checkpoint()\nc.listed = [V(1.0), V(2.0)]\np = c.save(D + '/c')\nr = tps.train.Checkpoint()\n"
     "r.restore(p)\nr.listed = []\nv = V(0.0)\nr.listed.append(v)\ncheck(float(v.numpy()) == 1.0, v)", None, None),
    ("manager_bad_max_to_keep", "tps.train.CheckpointManager(tps.train.Checkpoint(v=V(1.0)), D, max_to_keep=-2)",
     "max_to_keep", "-2"),
    ("manager_not_checkpoint", "tps.train.CheckpointManager({'v': 1}, D, max_to_keep=1)", "checkpoint", "dict"),
    ("load_checkpoint_missing", "tps.train.load_checkpoint(D + '/missing')", "load_checkpoint", "missing"),
    ("load_checkpoint_empty_folder", "tps.train.load_checkpoint(D)", "load_checkpoint", "folder"),
    ("reader_missing_key",
     "p = tps.train.Checkpoint(v=V(1.0)).save(D + '/c')\ntps.train.load_checkpoint(p).get_tensor('w')", "get_tensor", "Key w"),
    ("list_variables_int", "tps.train.list_variables(7)", "ckpt_dir_or_file", "7"),
    ("latest_checkpoint_int", "tps.train.latest_checkpoint(7)", "checkpoint_dir", "7"),
    # preemption
    ("termination_config_bad_grace", "tps.experimental.TerminationConfig(grace_period=-5)", "grace_period", "-5"),
    ("termination_config_bad_exit", "tps.experimental.TerminationConfig(exit_fn=42)", "exit_fn", "42"),
    ("handler_without_dir", "tps.experimental.PreemptionCheckpointHandler(None, tps.train.Checkpoint(v=V(1.0)))",
     "checkpoint_dir", "Checkpoint"),
    ("handler_bad_target", "tps.experimental.PreemptionCheckpointHandler(None, 'ckpt', D)",
     "checkpoint_or_checkpoint_manager", "str"),
    ("handler_bad_config", "tps.experimental.PreemptionCheckpointHandler(None, tps.train.Checkpoint(s=1), D, {'x': 1})",
     "termination_config", "dict"),
    # resolvers
    ("simple_resolver_bad_task_id", "tps.cluster_resolver.SimpleClusterResolver({'worker': ['a:1']}, task_id=-1)",
     "task_id", "-1"),
    ("cluster_spec_bad", "tps.cluster_resolver.ClusterSpec({'worker': 5})", "worker", "5"),
    ("tf_config_bad_json", "os.environ['TF_CONFIG'] = '{bad'\ntps.cluster_resolver.TFConfigClusterResolver().cluster_spec()",
     "TF_CONFIG", "{bad"),
    ("resolver_default_local",
     "r = S().cluster_resolver\ncheck(r.cluster_spec().as_dict() == {} and r.task_id is None, r)", None, None),
    ("initialize_bad_process_id", "tps.initialize(coordinator_address='127.0.0.1:1', num_processes=2, process_id=5)",
     "process_id", "5"),
    ("initialize_tpu_system_cpu",
     "t = tps.tpu.experimental.initialize_tpu_system()\ncheck(list(t.mesh_shape) == [8, 1, 1, 1], t.mesh_shape)", None, None),
    ("device_assignment_too_many",
     "t = tps.tpu.experimental.initialize_tpu_system()\ntps.tpu.experimental.DeviceAssignment.build(t, num_replicas=16)",
     "replicas", "16"),
    # optimizers
    ("optimizer_bad_lr", "tps.optimizers.RMSprop(learning_rate='fast')", "learning_rate", "fast"),
    ("optimizer_negative_lr", "tps.optimizers.Adagrad(learning_rate=-1.0)", "learning_rate", "-1.0"),
    ("optimizer_bad_rho", "tps.optimizers.Adadelta(rho=2.0)", "rho", "2.0"),
    ("optimizer_bad_beta", "tps.optimizers.Nadam(beta_1=1.0)", "beta_1", "1.0"),
    ("ftrl_positive_power", "tps.optimizers.Ftrl(learning_rate_power=1.0)", "learning_rate_power", "1.0"),
    ("adafactor_bad_decay", "tps.optimizers.Adafactor(beta_2_decay=0.3)", "beta_2_decay", "0.3"),
    ("lion_zero_beta", "tps.optimizers.Lion(beta_1=0.0)", "beta_1", "0.0"),
    ("clipnorm_and_global", "tps.optimizers.SGD(clipnorm=1.0, global_clipnorm=1.0)", "clipnorm", "1.0"),
    ("apply_none_gradient", "v = tps.Variable(1.0)\ntps.optimizers.SGD().apply_gradients([(None, v)])", "gradient",
     "None"),
    ("apply_grad_wrong_shape",
     "v = tps.Variable(jnp.zeros(3))\ntps.optimizers.Adam().apply_gradients([(jnp.ones(2), v)])",
     "gradient", "(2,)"),
    # lookup
    ("lookup_lengths", "tps.lookup.KeyValueTensorInitializer(['a', 'b'], [1])", "keys", "2"),
    ("lookup_bad_initializer", "tps.lookup.StaticHashTable({'a': 1}, -1)", "initializer", "dict"),
    ("lookup_bad_default", "tps.lookup.StaticHashTable(tps.lookup.KeyValueTensorInitializer(['a'], [1]), 'x')",
     "default_value", "'x'"),
    ("lookup_wrong_key_kind",
     "tps.lookup.StaticHashTable(tps.lookup.KeyValueTensorInitializer(['a'], [1]), -1).lookup(np.array([3]))",
     "lookup", "3"),
    ("vocab_zero_buckets",
     "tps.lookup.StaticVocabularyTable(tps.lookup.KeyValueTensorInitializer(['a'], [0]), 0)", "num_oov_buckets", "0"),
    ("vocab_in_map",
     "t = tps.lookup.StaticHashTable(tps.lookup.KeyValueTensorInitializer(['a', 'b'], [5, 6]), -1)\n"
     "check([int(x) for x in tpsd.Dataset.from_tensor_slices(['b', 'z']).map(t.lookup)] == [6, -1])", None, None),
    # the rest of the surface
    ("central_storage_bad_device", "tps.experimental.CentralStorageStrategy(parameter_device='/tpu:77')",
     "CentralStorageStrategy", "tpu:77"),
    ("outside_compilation_not_callable", "tps.tpu.outside_compilation('print', 1)", "computation", "print"),
    ("outside_compilation_in_function",
     "seen = []\nf = tps.function(lambda x: (tps.tpu.outside_compilation(lambda v: seen.append(float(v)), x), x)[1])\n"
     "f(jnp.float32(2))\nf(jnp.float32(3))\ncheck(seen == [2.0, 3.0], seen)", None, None),
    ("metric_bad_dtype", "tps.metrics.Mean(dtype='complex64x')", "dtype", "complex64x"),
    ("compute_average_loss_bad_batch", "tps.nn.compute_average_loss(jnp.ones(4), global_batch_size=0)",
     "global_batch_size", "0"),
    ("communication_bad_impl", "tps.experimental.CommunicationOptions(implementation='MPI')", "implementation", "MPI"),
    ("list_devices_bad_type", "tps.config.list_physical_devices('QPU')", "device_type", "QPU"),
]


def run_case(code: str, timeout: float) -> dict[str, str]:
    """Runs one case in a fresh interpreter; returns its outcome record."""
    program = PRELUDE + f"\nCODE = {code!r}\n" + textwrap.dedent(RUNNER)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_CONFIG", "TPS_"))}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    try:
        done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                              timeout=timeout, cwd=REPO, env=env)
    except subprocess.TimeoutExpired:
        return {"outcome": "hang"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("@@"):
            return json.loads(line[2:])
    return {"outcome": "crashed", "message": done.stderr[-2000:]}


def classify(case: tuple[str, str, str | None, str | None], record: dict[str, str]) -> dict[str, object]:
    """``ok``, ``lacking`` (with what), ``silent``, ``hang`` or ``crashed``."""
    name, _, arg, got = case
    outcome = record["outcome"]
    if outcome in ("hang", "crashed"):
        return {"id": name, "verdict": outcome, **record}
    if arg is None:  # TensorFlow accepts it: ours must give the right result
        verdict = "ok" if outcome == "returned" else "silent" if outcome == "wrong" else "lacking"
        missing = [] if verdict != "lacking" else ["a result (it raised)"]
        return {"id": name, "verdict": verdict, "missing": missing, **record}
    if outcome != "raised":
        return {"id": name, "verdict": "silent", **record}
    message = record["message"]
    lower = message.lower()
    missing = []
    if arg.lower() not in lower:
        missing.append(f"the argument ({arg})")
    if got.lower() not in lower:
        missing.append(f"the received value ({got})")
    if "fix" not in lower and "did you mean" not in lower:
        missing.append("the fix")
    return {"id": name, "verdict": "lacking" if missing else "ok", "missing": missing, **record}


def audit(ids: list[str] | None = None, jobs: int = 2, timeout: float = 120.0) -> list[dict[str, object]]:
    """Runs the cases (all, or those named) and returns one classified record per case."""
    cases = [c for c in CASES if not ids or c[0] in ids]
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        records = list(pool.map(lambda c: run_case(c[1], timeout), cases))
    return [classify(c, r) for c, r in zip(cases, records)]


def summary(results: list[dict[str, object]]) -> dict[str, int]:
    counts = {"cases": len(results)}
    for verdict in ("ok", "lacking", "silent", "hang", "crashed"):
        counts[verdict] = sum(r["verdict"] == verdict for r in results)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ids", nargs="*")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    results = audit(args.ids, args.jobs, args.timeout)
    for r in results:
        if r["verdict"] != "ok":
            detail = r.get("missing") or ""
            print(f"{r['verdict']:8s} {r['id']}: {detail} | {r.get('type', '')}: "
                  f"{str(r.get('message', ''))[:300]!r}")
    counts = summary(results)
    print(json.dumps(counts))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": counts, "results": results}, f, indent=1)
    bad = counts["silent"] + counts["hang"] + counts["crashed"]
    return 1 if bad or counts["lacking"] > 3 else 0


if __name__ == "__main__":
    sys.exit(main())
