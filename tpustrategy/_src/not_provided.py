"""TensorFlow names tpustrategy deliberately does not have, kept as names that explain themselves.

A program ported from TensorFlow that touches such a name gets an error saying
why the name has no meaning here and what to use instead, pointing at its row of
README's "TensorFlow names we do not have" table, instead of an
``AttributeError`` that reads like a bug. ``NotProvided`` stands for a module
attribute (a class, function or sub-module), ``NotProvidedMember`` for a method
or property of one of our classes. The surface test
(``tests/api_surface/test_api_surface.py``) checks that every placeholder has a
table row and every row a placeholder.

A leaf: no JAX, no internal imports (``tpustrategy._src.data`` uses it too).
"""

from __future__ import annotations

from typing import Any, NoReturn

README_TABLE = "TensorFlow names we do not have"

# tf_name -> (why not, use instead): the README table's rows for the placeholders made by `not_provided`.
REASONS: dict[str, tuple[str, str]] = {
    "tf.train.experimental": (
        "its checkpoint sharding callbacks (ShardingCallback, MaxShardSizePolicy, ShardByTaskPolicy, "
        "PythonState, ShardableTensor) plug into TensorFlow's saver; orbax-checkpoint shards arrays by itself.",
        "tps.train.Checkpoint (orbax writes each array's shards)."),
    "tf.lookup.experimental": (
        "DenseHashTable and MutableHashTable are TensorFlow resources updated by graph ops; tps.lookup's "
        "tables are NumPy lookups for the input pipeline.",
        "tps.lookup.StaticHashTable / StaticVocabularyTable, or a Python dict in Dataset.map."),
    "tf.config.experimental.reset_memory_stats": (
        "JAX's allocators keep a peak-bytes statistic that cannot be reset.",
        "compare tps.config.experimental.get_memory_info(d)['peak'] before and after, or use "
        "jax.profiler's device memory profile."),
    "tf.train.ClusterSpec.as_cluster_def": (
        "a ClusterDef protocol buffer configures TensorFlow's gRPC servers; JAX's processes find each other "
        "through jax.distributed's coordinator.",
        "ClusterSpec.as_dict(), or the resolver passed to tps.initialize."),
    "tf.tpu.experimental.embedding": (
        "TPUEmbedding drives the TPU's embedding hardware (SparseCore) through TensorFlow ops; JAX has no "
        "public API for it.",
        "an embedding table as a variable looked up with jnp.take (sharded by the strategy)."),
    'tf.io.TFRecordOptions': (
        "tpsd.TFRecordWriter and the TFRecord readers take only the compression type; zlib's tuning (buffer sizes, window bits, level, strategy) is not exposed.",
        "tpsd.TFRecordWriter(path, compression_type='GZIP' or 'ZLIB')."),
    'tf.io.decode_proto': (
        "it looks message types up in the descriptor pool of TensorFlow's C++ runtime, which does not exist here.",
        'the `protobuf` package: YourMessage.FromString(b) in Dataset.map.'),
    'tf.io.encode_proto': (
        "it looks message types up in the descriptor pool of TensorFlow's C++ runtime, which does not exist here.",
        'the `protobuf` package: YourMessage(...).SerializeToString() in Dataset.map.'),
    'tf.io.write_graph': (
        'it writes a TensorFlow GraphDef; a JAX program has no TensorFlow graph.',
        "jax.jit(f).lower(*args).as_text() for the program's StableHLO, or jax.export to serialize it."),
    'tf.io.decode_webp': (
        "decoding WebP needs libwebp, which tps.io's codecs (and tps.io.decode_image) do not include.",
        "Pillow (built with WebP, as its wheels are): np.asarray(PIL.Image.open(io.BytesIO(b)).convert('RGB')) in Dataset.map."),
    'tf.image.decode_webp': (
        "decoding WebP needs libwebp, which tps.io's codecs (and tps.io.decode_image) do not include.",
        "Pillow (built with WebP, as its wheels are): np.asarray(PIL.Image.open(io.BytesIO(b)).convert('RGB')) in Dataset.map."),
    'tf.io.decode_jxl': (
        "decoding JPEG XL needs libjxl, which tps.io's codecs do not include.",
        'convert the files to PNG or JPEG, or decode with a libjxl binding (e.g. the pillow-jxl-plugin package) in Dataset.map.'),
    'tf.image.decode_jxl': (
        "decoding JPEG XL needs libjxl, which tps.io's codecs do not include.",
        'convert the files to PNG or JPEG, or decode with a libjxl binding (e.g. the pillow-jxl-plugin package) in Dataset.map.'),
    'tf.image.extract_glimpse': (
        'not implemented: its noise fill and its centred/normalized offset conventions have no faithful NumPy port here yet.',
        'tps.image.crop_and_resize with boxes around the glimpse centres, or tps.image.crop_to_bounding_box.'),
    'tf.image.generate_bounding_box_proposals': (
        "not implemented: Faster R-CNN's proposal op (anchor decoding, pre-NMS top-n, min-size filter) is not ported.",
        'decode the anchors in NumPy and select with tps.image.non_max_suppression_padded.'),
}


class NotProvidedError(NotImplementedError):
    """Raised when a program uses a TensorFlow name tpustrategy deliberately does not have."""


def _message(tf_name: str, reason: str, instead: str) -> str:
    return (
        f"{tf_name} has no counterpart in tpustrategy: {reason}\n"
        f"Use instead: {instead}\n"
        f"(README, section {README_TABLE!r}, row {tf_name!r}.)"
    )


class NotProvided:
    """A module attribute standing for a TensorFlow name we do not have.

    Calling it, or reading any of its attributes, raises ``NotProvidedError``.

    Args:
        tf_name: TensorFlow's full name (``"tf.lookup.experimental"``), as in the README row.
        reason: Why the name has no meaning on JAX.
        instead: What to use instead.
    """

    def __init__(self, tf_name: str, reason: str, instead: str) -> None:
        object.__setattr__(self, "tf_name", tf_name)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "instead", instead)

    def error(self) -> NotProvidedError:
        """The error every use of this name raises."""
        return NotProvidedError(_message(self.tf_name, self.reason, self.instead))

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise self.error()

    def __getattr__(self, name: str) -> NoReturn:
        if name.startswith("__") and name.endswith("__"):  # copy, pickle, inspect and pytest probe these
            raise AttributeError(name)
        raise self.error()

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise self.error()

    def __repr__(self) -> str:
        return f"<{self.tf_name}: not provided by tpustrategy; see README {README_TABLE!r}>"


def not_provided(tf_name: str) -> NotProvided:
    """The placeholder for ``tf_name``, with its reason and alternative from ``REASONS``."""
    reason, instead = REASONS[tf_name]
    return NotProvided(tf_name, reason, instead)


def not_provided_member(tf_name: str) -> NotProvidedMember:
    """The member placeholder for ``tf_name`` (a method or property), from ``REASONS``."""
    reason, instead = REASONS[tf_name]
    return NotProvidedMember(tf_name, reason, instead)


class NotProvidedMember:
    """A method or property of one of our classes standing for a TensorFlow member we do not have.

    Reading it on an instance raises ``NotProvidedError``; on the class it gives
    the placeholder itself (so ``help()`` and the surface test can see it).

    Args:
        tf_name: TensorFlow's full name (``"tf.distribute.TPUStrategy.xyz"``), as in the README row.
        reason: Why the member has no meaning on JAX.
        instead: What to use instead.
    """

    def __init__(self, tf_name: str, reason: str, instead: str) -> None:
        self.tf_name = tf_name
        self.reason = reason
        self.instead = instead
        self.__doc__ = _message(tf_name, reason, instead)

    def error(self) -> NotProvidedError:
        """The error every use of this member raises."""
        return NotProvidedError(_message(self.tf_name, self.reason, self.instead))

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self
        raise self.error()
