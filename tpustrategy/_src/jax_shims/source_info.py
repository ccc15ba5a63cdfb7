"""Where the user's code made a traced equation, for error messages.

``jax._src.source_info_util.user_frames`` walks an equation's recorded traceback
and drops JAX's own frames; JAX 0.10 has no public equivalent (``jax.Array``
errors print it themselves, but a library that names the line of the user's
code that made an offending operation needs the frames). Messages only: when
the name moves, `user_frames` gives no frames (the message says ``unknown``),
and ``check()`` raises so that ``tests/jax_shims`` fails.
"""

from __future__ import annotations

from typing import Any

from tpustrategy._src.jax_shims import supported


def check() -> None:
    """Raises ``RuntimeError`` when the private name this module reads is gone."""
    from jax._src import source_info_util

    if not callable(getattr(source_info_util, "user_frames", None)):
        raise RuntimeError("tpustrategy: jax._src.source_info_util.user_frames moved in this JAX "
                           "version.\n" + supported.FIX)


def user_frames(eqn: Any) -> list[Any]:
    """The frames outside JAX of the traceback recorded with ``eqn`` (each with ``file_name``,
    ``start_line``, ``function_name``), innermost first; ``[]`` when unknown."""
    try:
        from jax._src import source_info_util

        return list(source_info_util.user_frames(eqn.source_info.traceback))
    except Exception:  # best effort: a message must never hide the error it explains
        return []
