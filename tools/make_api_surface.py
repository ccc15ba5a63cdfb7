"""Writes TensorFlow 2.21's public member lists for the surface test.

Run with TensorFlow installed (it is used by this script only, never by the
library or its tests)::

    /work/tfvenv/bin/python tools/make_api_surface.py

The output, ``tests/api_surface/tf_api_surface_2.21.json``, maps each
TensorFlow module or class a TPU program uses to

- ``renamed``: the tpustrategy path it is looked up under (``tf.distribute`` ->
  ``tps``; an expression where TensorFlow's class is only met as an object,
  evaluated by the test with ``tps``, ``tpsd``, ``strategy`` and ``ds`` bound);
- ``members``: TensorFlow's own ``dir()`` (public names; for ``tf.Variable`` also
  the operators it defines), less the TF1-era names;
- ``legacy``: TF1-era and graph-mode names (``configure``, ``eval``, ``op``, ...),
  listed so a reader sees they were left out on purpose, not counted.

``tf.train``, ``tf.config`` and ``tf.config.experimental`` are cut to their
distribution / checkpoint / device names (``keep``).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from dataclasses import dataclass, field

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "api_surface", "tf_api_surface_2.21.json")

_STRATEGY_LEGACY = ("colocate_vars_with", "configure", "experimental_run", "group", "make_dataset_iterator",
                    "make_input_fn_iterator", "unwrap", "update_config_proto")
_TUPLE_LEGACY = ("count", "index")  # namedtuple methods of TF's option tuples

# Operators of tf.Variable that count (TF also defines Python 2's __div__ / __rdiv__).
_VARIABLE_OPERATORS = (
    "__abs__", "__add__", "__and__", "__floordiv__", "__ge__", "__getitem__", "__gt__", "__invert__",
    "__iter__", "__le__", "__lt__", "__matmul__", "__mod__", "__mul__", "__neg__", "__or__", "__pow__",
    "__radd__", "__rand__", "__rfloordiv__", "__rmatmul__", "__rmod__", "__rmul__", "__ror__", "__rpow__",
    "__rsub__", "__rtruediv__", "__rxor__", "__sub__", "__truediv__", "__xor__",
)


@dataclass(frozen=True)
class Entry:
    """One TensorFlow module or class and where its tpustrategy counterpart is."""

    tf: str
    renamed: str
    legacy: tuple[str, ...] = ()
    keep: tuple[str, ...] | None = None  # None: every public name
    operators: tuple[str, ...] = field(default=())


ENTRIES = (
    Entry("tf.distribute", "tps",
          legacy=("ParameterServerStrategy", "Server", "coordinator", "experimental_set_strategy")),
    Entry("tf.distribute.experimental", "tps.experimental",
          legacy=("CollectiveCommunication", "CollectiveHints", "ParameterServerStrategy", "coordinator",
                  "partitioners", "rpc")),
    Entry("tf.distribute.cluster_resolver", "tps.cluster_resolver",
          legacy=("GCEClusterResolver", "KubernetesClusterResolver", "KubernetesExecutableLocation")),
    Entry("tf.distribute.TPUStrategy", "tps.TPUStrategy", legacy=_STRATEGY_LEGACY),
    Entry("tf.distribute.MirroredStrategy", "tps.MirroredStrategy", legacy=_STRATEGY_LEGACY),
    Entry("tf.distribute.OneDeviceStrategy", "tps.OneDeviceStrategy", legacy=_STRATEGY_LEGACY),
    Entry("tf.distribute.MultiWorkerMirroredStrategy", "tps.MultiWorkerMirroredStrategy", legacy=_STRATEGY_LEGACY),
    Entry("tf.distribute.StrategyExtended", "tps.TPUStrategy().extended", legacy=("colocate_vars_with",)),
    Entry("tf.distribute.ReplicaContext", "tps.ReplicaContext"),
    Entry("tf.distribute.InputContext", "tps.InputContext"),
    Entry("tf.distribute.InputOptions", "tps.InputOptions", legacy=_TUPLE_LEGACY),
    Entry("tf.distribute.RunOptions", "tps.RunOptions", legacy=_TUPLE_LEGACY),
    Entry("tf.distribute.DistributedDataset", "strategy.experimental_distribute_dataset(ds)"),
    Entry("tf.distribute.DistributedIterator", "iter(strategy.experimental_distribute_dataset(ds))"),
    Entry("tf.distribute.experimental.PreemptionCheckpointHandler", "tps.experimental.PreemptionCheckpointHandler"),
    Entry("tf.distribute.experimental.PreemptionWatcher", "tps.experimental.PreemptionWatcher"),
    Entry("tf.distribute.experimental.TerminationConfig", "tps.experimental.TerminationConfig"),
    Entry("tf.distribute.experimental.ValueContext", "tps.experimental.ValueContext"),
    Entry("tf.distribute.cluster_resolver.TPUClusterResolver", "tps.cluster_resolver.TPUClusterResolver"),
    Entry("tf.distribute.cluster_resolver.TFConfigClusterResolver", "tps.cluster_resolver.TFConfigClusterResolver"),
    Entry("tf.distribute.cluster_resolver.UnionResolver", "tps.cluster_resolver.UnionResolver"),
    Entry("tf.Variable", "tps.Variable",
          legacy=("SaveSliceInfo", "count_up_to", "eval", "experimental_ref", "from_proto", "graph",
                  "initialized_value", "initializer", "load", "op", "set_shape", "to_proto"),
          operators=_VARIABLE_OPERATORS),
    Entry("tf.GradientTape", "tps.GradientTape"),
    Entry("tf.train", "tps.train",
          legacy=("ClusterDef", "JobDef", "ServerDef"),
          keep=("BytesList", "Checkpoint", "CheckpointManager", "CheckpointOptions", "CheckpointView",
                "ClusterSpec", "Example", "Feature", "FeatureList", "FeatureLists", "Features", "FloatList",
                "Int64List", "SequenceExample", "checkpoints_iterator", "experimental", "get_checkpoint_state",
                "latest_checkpoint", "list_variables", "load_checkpoint", "load_variable")),
    Entry("tf.train.Checkpoint", "tps.train.Checkpoint"),
    Entry("tf.train.CheckpointManager", "tps.train.CheckpointManager"),
    Entry("tf.train.ClusterSpec", "tps.train.ClusterSpec"),
    Entry("tf.data", "tpsd"),
    Entry("tf.data.experimental", "tpsd.experimental",
          legacy=("ServiceOptions", "SqlDataset", "distributed_save", "from_variant", "get_model_proto", "load",
                  "make_saveable_from_iterator", "service", "to_variant")),
    Entry("tf.data.Dataset", "tpsd.Dataset", legacy=("load",)),
    Entry("tf.data.Options", "tpsd.Options", legacy=("experimental_deterministic", "experimental_service",
                                                     "framework_type")),
    Entry("tf.data.Iterator", "tpsd.DatasetIterator"),
    Entry("tf.errors", "tps.errors"),
    Entry("tf.tpu", "tps.tpu"),
    Entry("tf.tpu.XLAOptions", "tps.tpu.XLAOptions", legacy=_TUPLE_LEGACY),
    Entry("tf.tpu.experimental", "tps.tpu.experimental"),
    Entry("tf.tpu.experimental.DeviceAssignment", "tps.tpu.experimental.DeviceAssignment"),
    Entry("tf.tpu.experimental.Topology", "tps.tpu.experimental.Topology"),
    Entry("tf.tpu.experimental.HardwareFeature", "tps.tpu.experimental.HardwareFeature"),
    Entry("tf.tpu.experimental.TPUSystemMetadata", "tps.tpu.experimental.TPUSystemMetadata", legacy=_TUPLE_LEGACY),
    Entry("tf.lookup", "tps.lookup"),
    Entry("tf.config", "tps.config",
          legacy=("experimental_functions_run_eagerly", "experimental_run_functions_eagerly"),
          keep=("LogicalDevice", "LogicalDeviceConfiguration", "PhysicalDevice", "experimental",
                "experimental_connect_to_cluster", "experimental_connect_to_host", "functions_run_eagerly",
                "get_logical_device_configuration", "get_soft_device_placement", "get_visible_devices",
                "list_logical_devices", "list_physical_devices", "run_functions_eagerly",
                "set_logical_device_configuration", "set_soft_device_placement", "set_visible_devices",
                "threading")),
    Entry("tf.config.experimental", "tps.config.experimental",
          legacy=("ClusterDeviceFilters", "disable_mlir_bridge", "enable_mlir_bridge", "get_device_policy",
                  "get_synchronous_execution", "set_device_policy", "set_synchronous_execution"),
          keep=("VirtualDeviceConfiguration", "enable_op_determinism", "enable_tensor_float_32_execution",
                "get_device_details", "get_memory_growth", "get_memory_info", "get_memory_usage",
                "get_virtual_device_configuration", "get_visible_devices", "list_logical_devices",
                "list_physical_devices", "reset_memory_stats", "set_memory_growth",
                "set_virtual_device_configuration", "set_visible_devices", "tensor_float_32_execution_enabled")),
    Entry("tf.config.threading", "tps.config.threading"),
    # The input-pipeline op modules (issue 39); the surface test checks those in its INPUT_OP_MODULES_CHECKED.
    Entry("tf.io", "tps.io"),
    Entry("tf.io.gfile", "tps.io.gfile"),
    Entry("tf.image", "tps.image"),
    Entry("tf.strings", "tps.strings"),
    Entry("tf.sparse", "tps.sparse"),
)


def _resolve(tf: object, path: str) -> object:
    obj = tf
    for part in path.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def members_of(tf: object, entry: Entry) -> dict[str, object]:
    """``{"renamed", "members", "legacy"}`` for one entry, from TensorFlow's ``dir()``."""
    obj = _resolve(tf, entry.tf)
    public = {name for name in dir(obj) if not name.startswith("_")}
    missing_legacy = sorted(set(entry.legacy) - public)
    if missing_legacy:
        raise SystemExit(f"{entry.tf}: legacy names {missing_legacy} are not in TensorFlow's dir(); update ENTRIES")
    if entry.keep is not None:
        absent = sorted(set(entry.keep) - public)
        if absent:
            raise SystemExit(f"{entry.tf}: kept names {absent} are not in TensorFlow's dir(); update ENTRIES")
        public &= set(entry.keep) | set(entry.legacy)
    operators = {name for name in entry.operators if getattr(obj, name, None) is not None}
    return {
        "renamed": entry.renamed,
        "members": sorted((public - set(entry.legacy)) | operators),
        "legacy": sorted(entry.legacy),
    }


def main() -> None:
    """Writes the JSON file next to the surface test."""
    tf = importlib.import_module("tensorflow")
    surface: dict[str, object] = {
        "_about": (
            "TensorFlow's public names (its own dir()) for the modules and classes a TPU program uses, with "
            "the renamed tpustrategy path each is looked up under (an expression is evaluated with tps, tpsd, "
            "strategy and ds bound). 'members' count; 'legacy' are TF1-era or graph-mode names (not counted). "
            "tf.train, tf.config and tf.config.experimental are cut to their distribution / checkpoint / device "
            "names. Variable operators are listed where TF defines them. Made by tools/make_api_surface.py."
        ),
        "_tf_version": tf.__version__,
    }
    for entry in ENTRIES:
        surface[entry.tf] = members_of(tf, entry)
    with open(OUT, "w") as f:
        json.dump(surface, f, indent=1, sort_keys=False)
        f.write("\n")
    counted = sum(len(v["members"]) for k, v in surface.items() if not k.startswith("_"))  # type: ignore[union-attr]
    print(f"wrote {os.path.normpath(OUT)}: {len(ENTRIES)} entries, {counted} names", file=sys.stderr)


if __name__ == "__main__":
    main()
