"""``tps.train.Checkpoint``: save and restore variables, arrays, input positions and numbers.

The counterpart of ``tf.train.Checkpoint``. Objects are given by name
(``Checkpoint(model=..., optimizer=..., iterator=..., step=...)``) or set as
attributes later; ``save(prefix)`` writes ``prefix-N`` (N counts the saves),
``write(path)`` writes exactly ``path``, ``restore(path)`` puts every saved
value back: variables, iterators and NumPy arrays in place, ``jax.Array``s,
pytrees and Python numbers as the checkpoint's attributes (``ckpt.params``
after ``restore`` is the restored tree; dicts and lists are also updated in
place). An optimizer that has not run yet is built for its saved variables
first, so its state is restored too.
``read(path, like=...)`` returns restored values without a Checkpoint holding
them. See ``graph`` for what is tracked, ``writer``/``reader`` for the protocol.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from tpustrategy._src.checkpoint import asynchronous, deferred, multihost, reader, writer
from tpustrategy._src.checkpoint import options as options_lib
from tpustrategy._src.checkpoint.graph import Graph
from tpustrategy._src.checkpoint.holder import NamedObjects
from tpustrategy._src.checkpoint.options import CheckpointOptions
from tpustrategy._src.checkpoint.status import CheckpointLoadStatus, InitializationOnlyStatus
from tpustrategy._src.checkpoint.tf_format import restore as tf_restore
from tpustrategy._src.checkpoint.tf_format import tf_writer

_RESERVED = frozenset({"save", "write", "restore", "read", "save_counter", "sync", "options"})


def _check_path(value: Any, api: str, arg: str) -> str:
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        if isinstance(text, str) and text:
            return text
    raise TypeError(
        f"{api}: {arg} must be a non-empty path (str or os.PathLike); received "
        f"{type(value).__name__}: {value!r}.\nFix: e.g. {api.split('.')[0].lower()}."
        f"{api.split('.')[-1]}('/tmp/training_checkpoints/ckpt')."
    )


class Checkpoint(NamedObjects):
    """Groups the objects to save and restore together (``tf.train.Checkpoint``).

    Args:
      root: optional object whose attributes holding state are saved as if
        they were passed by name.
      **objects: the objects by name: ``tps.Variable``s, arrays, pytrees of
        them (flax/optax/equinox state), iterators from ``iter(dataset)`` or
        ``iter(strategy.experimental_distribute_dataset(...))`` /
        ``distribute_datasets_from_function``, Python ``int``/``float``/
        ``bool``/``str``, nested ``Checkpoint``s, or objects whose attributes
        hold those (a model, an optimizer).
      options: a ``tps.train.CheckpointOptions`` used by every save and
        restore that passes none of its own (e.g. ``enable_async=True``).

    Example:
      >>> ckpt = tps.train.Checkpoint(params=params, opt_state=opt_state,
      ...                             iterator=iterator, step=0)
      >>> path = ckpt.save("/tmp/ckpts/ckpt")            # '/tmp/ckpts/ckpt-1'
      >>> ckpt.restore(tps.train.latest_checkpoint("/tmp/ckpts"))
      >>> params, opt_state = ckpt.params, ckpt.opt_state
    """

    def __init__(self, root: Any = None, options: CheckpointOptions | None = None, **objects: Any):
        checked = options_lib.check(options, "tps.train.Checkpoint")
        NamedObjects.__init__(self, root)
        object.__setattr__(self, "_options", checked)
        object.__setattr__(self, "_save_counter", 0)
        for name, value in objects.items():
            setattr(self, name, value)

    # Objects ---------------------------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
            return
        if name in _RESERVED:
            raise ValueError(
                f"tps.train.Checkpoint: {name!r} is the name of a Checkpoint method or property "
                "and cannot name a checkpointed object.\nFix: choose another name, e.g. "
                f"Checkpoint(my_{name}=...)."
            )
        self._objects[name] = value
        if self._pending:  # a value saved under this name waits for it (deferred restoration)
            for prefix in {k for k, _ in self._pending}:
                deferred.restore_into(prefix, name, value, lambda v: self._objects.__setitem__(name, v),
                                      self._pending, strict=True)
            deferred.prune(self._pending)

    def __repr__(self) -> str:
        return f"<tps.train.Checkpoint {sorted(self._objects)} save_counter={self._save_counter}>"

    @property
    def save_counter(self) -> int:
        """How many times ``save`` was called (restored with the checkpoint), as in TF."""
        return self._save_counter

    def _graph(self, api: str, restoring: bool = False) -> Graph:
        named: list[tuple[str, Any, Callable[[Any], None], bool]] = []
        root = self._root
        if root is not None:
            for name, value in sorted(vars(root).items()):
                if not name.startswith("__") and name not in self._objects:
                    named.append((name, value, lambda v, n=name: setattr(root, n, v), False))
        for name, value in self._objects.items():
            named.append((name, value, lambda v, n=name: self._objects.__setitem__(n, v), True))
        return Graph(named, api, restoring=restoring)

    # Saving ----------------------------------------------------------------------------------
    def save(self, file_prefix: str | os.PathLike[str], options: CheckpointOptions | None = None, *,
             format: str = "tpustrategy") -> str:
        """Saves to ``f"{file_prefix}-{save_counter + 1}"`` and returns that path.

        Every process of a multi-process job must call it at the same step;
        they check that they agree on the number. The checkpoint becomes
        visible (to ``restore``, ``latest_checkpoint``) only once complete.
        ``format="tensorflow"`` writes TensorFlow's files instead
        (``prefix-N.index`` + data, ``save_counter``; `tf_format.tf_writer`).
        """
        api = "Checkpoint.save"
        opts = options_lib.merged(options_lib.check(options, api), self._options)
        prefix = _check_path(file_prefix, api, "file_prefix")
        tensorflow = tf_writer.wants_tensorflow(format, api)
        asynchronous.wait_all()
        number = multihost.agree(api, "the checkpoint number (save_counter + 1)", self._save_counter + 1)
        path = f"{prefix}-{number}"

        def record() -> None:  # TensorFlow's Checkpoint.save names it in the folder's state file
            from tpustrategy._src.checkpoint import recovery

            directory = os.path.dirname(path) or "."
            recovery.write_state(directory, [(path, time.time())], path, None)

        if tensorflow:
            tf_writer.write(self, path, number, api)
            self._save_counter = number
            if multihost.process_index() == 0:
                record()
            options_lib.run_write_callbacks(opts, path)
            return path
        self._save_as(path, number, number, api, opts, then=record)
        return path

    def _save_as(self, path: str, number: int | None, save_counter: int, api: str,
                 options: CheckpointOptions | None = None,
                 then: Callable[[], None] | None = None) -> writer.Written:
        opts = options or self._options or CheckpointOptions()
        asynchronous.wait_all()

        def after_commit() -> None:
            if then is not None:
                then()
            options_lib.run_write_callbacks(opts, path)

        written = writer.write(self._graph(api), path, numbered=number is not None, number=number,
                               save_counter=save_counter, api=api, asynchronous_save=opts.asynchronous,
                               then=after_commit)
        self._save_counter = save_counter
        return written

    def _run_write_callbacks(self, options: CheckpointOptions | None, path: str) -> None:
        """``experimental_write_callbacks`` of the call's options, else of this Checkpoint's."""
        options_lib.run_write_callbacks(options_lib.merged(options, self._options), path)

    def write(self, file_prefix: str | os.PathLike[str], options: CheckpointOptions | None = None, *,
              format: str = "tpustrategy") -> str:
        """Writes exactly ``file_prefix`` (no number; ``latest_checkpoint`` does not list it).

        Writing the same path again replaces it; at every moment one complete
        copy can be restored from ``file_prefix``. ``format="tensorflow"``
        writes TensorFlow's ``file_prefix.index`` + data files instead.
        """
        api = "Checkpoint.write"
        opts = options_lib.merged(options_lib.check(options, api), self._options)
        path = _check_path(file_prefix, api, "file_prefix")
        tensorflow = tf_writer.wants_tensorflow(format, api)
        asynchronous.wait_all()
        if tensorflow:
            tf_writer.write(self, path, self._save_counter or None, api)
            options_lib.run_write_callbacks(opts, path)
            return path
        writer.write(self._graph(api), path, numbered=False, number=None,
                     save_counter=self._save_counter, api=api, asynchronous_save=opts.asynchronous,
                     then=lambda: options_lib.run_write_callbacks(opts, path))
        return path

    def sync(self) -> None:
        """Waits until asynchronous saves are written and committed (raises their error)."""
        asynchronous.wait_all()
        multihost.barrier("checkpoint-sync")

    # Restoring -------------------------------------------------------------------------------
    def restore(self, save_path: str | os.PathLike[str] | None,
                options: CheckpointOptions | None = None) -> CheckpointLoadStatus:
        """Restores every object found in the checkpoint at ``save_path``.

        ``save_path=None`` (e.g. ``manager.latest_checkpoint`` before the first
        save) restores nothing and returns a status saying so, as in TF.

        Returns:
          A ``CheckpointLoadStatus`` (``assert_consumed()``, ``expect_partial()``, ...).

        Raises:
          tps.errors.NotFoundError: no checkpoint at ``save_path`` (a ``FileNotFoundError``).
          tps.errors.DataLossError: the checkpoint is incomplete or damaged
            (naming the file); nothing was changed.
          ValueError: a saved value does not fit its object (shape, dtype,
            kind), or iterator positions cannot move to this process count.
        """
        api = "Checkpoint.restore"
        opts = options_lib.merged(options_lib.check(options, api), self._options)
        if save_path is None:
            return InitializationOnlyStatus()
        path = _check_path(save_path, api, "save_path")
        asynchronous.wait_all()
        if tf_restore.is_tf_checkpoint(path):  # TensorFlow's own files: ckpt-N.index + data
            return tf_restore.restore(self, path, api, make_graph=lambda: self._graph(api, restoring=True),
                                      set_save_counter=lambda n: object.__setattr__(self, "_save_counter", n))
        status, manifest, graph = reader.restore(lambda: self._graph(api, restoring=True), path, api,
                                                 skip_slots=opts.experimental_skip_slot_variables)
        self._save_counter = int(manifest.get("save_counter", self._save_counter))
        unused = status.unused
        if opts.experimental_skip_slot_variables:  # skipped: not restored later either
            unused = [k for k in unused if "/_slots/" not in f"/{k}/"]
        status._pending = deferred.start(self, graph, unused, manifest, path, api)
        return status

    def read(self, save_path: str | os.PathLike[str], options: Any = None, like: dict[str, Any] | None = None) -> Any:
        """Reads a checkpoint (``tf.train.Checkpoint.read``), optionally into templates.

        Args:
          save_path: a checkpoint path.
          options: a ``tps.train.CheckpointOptions`` (as in ``restore``).
          like: None to restore this Checkpoint's objects (as ``restore``); or
            a dict from saved names to templates (pytrees of arrays or
            ``jax.ShapeDtypeStruct`` with shardings) to read just those,
            without touching this Checkpoint's objects.

        Returns:
          The load status; with ``like``, a dict name -> restored value.
        """
        if like is None:
            return self.restore(save_path, options)
        if not isinstance(like, dict) or not all(isinstance(k, str) for k in like):
            raise TypeError(
                "Checkpoint.read: like must be a dict from the names the objects were saved under "
                f"to templates; received {type(like).__name__}.\nFix: e.g. ckpt.read(path, "
                "like={'params': params_template})."
            )
        api = "Checkpoint.read"
        opts = options_lib.merged(options_lib.check(options, api), self._options)
        holder = Checkpoint(**like)
        path = _check_path(save_path, api, "save_path")
        asynchronous.wait_all()
        reader.restore(lambda: holder._graph(api), path, api, require_all=True,
                       skip_slots=opts.experimental_skip_slot_variables)
        return dict(holder._objects)
