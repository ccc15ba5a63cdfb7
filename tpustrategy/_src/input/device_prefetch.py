"""``tf.data.experimental.copy_to_device`` / ``prefetch_to_device``: elements placed on one device.

``copy_to_device(target_device)`` is a dataset node whose iterator puts every
numeric leaf of an element on ``target_device`` as a ``jax.Array`` (strings and
object leaves stay on the host, as TensorFlow keeps string tensors on the
CPU). ``prefetch_to_device(device, buffer_size)`` is TensorFlow's composition:
``copy_to_device(device)`` followed by ``prefetch(buffer_size)``, so the
prefetch thread does the transfer and ``buffer_size`` elements (default 2)
wait on the device while the caller's step runs.

Like TensorFlow's, these belong at the end of a pipeline. A distributed
dataset places batches on the replicas' devices itself (`to_device`), so
`without_device_copies` drops these nodes from the pipeline it distributes.

The node lives here and not in ``data/`` because placing needs the device
vocabulary (``devices.mesh.resolve_device``), which sits above ``data``. JAX is
imported when a node is made, not with ``tpustrategy.data``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator
from tpustrategy._src.data.transformations.prefetch import PrefetchDataset

_DEFAULT_BUFFER = 2


def _resolve(target_device: Any) -> Any:
    from tpustrategy._src.devices.mesh import resolve_device

    return resolve_device(target_device, "tpsd.experimental.copy_to_device: `target_device`")


class CopyToDeviceDataset(Dataset):
    """Elements with their numeric leaves on ``target_device`` (``tf.data.experimental.copy_to_device``).

    Attributes:
      target_device: the device's TensorFlow-style name (``"/gpu:0"``) or a ``jax.Device``.
      source_device: accepted for TensorFlow's signature; elements always start on the host.
    """

    _params = ("target_device", "source_device")

    def __init__(self, input_dataset: Dataset, target_device: Any, source_device: str = "/cpu:0"):
        super().__init__((input_dataset,))
        # Resolved now, so a device that does not exist is named where the pipeline is built.
        _resolve(target_device)
        self.target_device = target_device
        self.source_device = source_device

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return input_spec(self.inputs[0])

    def _compute_cardinality(self) -> int:
        return self.inputs[0].cardinality()

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        device = _resolve(self.target_device)
        return _CopyIterator(self.inputs[0]._make_iterator(ctx), device)


def _place(x: Any, device: Any) -> Any:
    import jax

    if isinstance(x, (bytes, str)):
        return x
    if hasattr(x, "dtype") and getattr(x.dtype, "kind", "O") in "OSU":
        return x  # strings stay on the host, as TensorFlow keeps them on the CPU
    return jax.device_put(x, device)


class _CopyIterator(NodeIterator):
    def __init__(self, it: NodeIterator, device: Any):
        self._it, self._device = it, device

    def __next__(self) -> Any:
        element = self._it.__next__()
        import jax

        device = self._device
        return jax.tree_util.tree_map(lambda x: _place(x, device), element)

    def _skip(self, n: int) -> int:
        return self._it._skip(n)

    def get_state(self) -> dict[str, Any]:
        return self._it.get_state()  # placement holds no position of its own

    def set_state(self, state: dict[str, Any]) -> None:
        self._it.set_state(state)

    def close(self) -> None:
        self._it.close()


def copy_to_device(target_device: Any, source_device: str = "/cpu:0") -> Callable[[Dataset], Dataset]:
    """``tf.data.experimental.copy_to_device``: for `Dataset.apply`.

    Each element's numeric leaves become ``jax.Array``s on ``target_device``
    (``"/gpu:0"``, ``"/device:TPU:1"``, ``"/cpu:0"`` or a ``jax.Device``); string
    leaves stay host NumPy arrays. A device that does not exist raises a
    ValueError naming the devices there are.
    """

    def apply(dataset: Dataset) -> Dataset:
        return CopyToDeviceDataset(dataset, target_device, source_device)

    return apply


def prefetch_to_device(device: Any, buffer_size: int | None = None) -> Callable[[Dataset], Dataset]:
    """``tf.data.experimental.prefetch_to_device``: for `Dataset.apply`, at the end of a pipeline.

    ``copy_to_device(device)`` then ``prefetch(buffer_size)``: a background thread
    keeps ``buffer_size`` elements (default 2; None as in TensorFlow means the
    default) already placed on ``device``, so the transfer overlaps the caller's
    work on the previous element.
    """

    def apply(dataset: Dataset) -> Dataset:
        size = _DEFAULT_BUFFER if buffer_size is None else buffer_size
        return PrefetchDataset(CopyToDeviceDataset(dataset, device), size)

    return apply


def without_device_copies(dataset: Dataset) -> Dataset:
    """``dataset`` without its `CopyToDeviceDataset` nodes (a distributed dataset places batches itself)."""
    from tpustrategy._src.data.core.graph import rewrite, walk

    if not any(isinstance(node, CopyToDeviceDataset) for node in walk(dataset)):
        return dataset
    return rewrite(dataset, lambda node: node.inputs[0] if isinstance(node, CopyToDeviceDataset) else None)
