"""The source-info shim: the user's line of a traced equation (for error messages)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from tpustrategy._src.execution import jaxpr_tools
from tpustrategy._src.jax_shims import source_info


def test_the_private_helper_exists():
    source_info.check()


def _made_here(x):
    return jnp.sin(x) * 2.0  # the line the equations point at


def test_an_equation_names_the_users_line():
    eqns = jax.make_jaxpr(_made_here)(1.0).jaxpr.eqns
    frames = source_info.user_frames(eqns[0])
    assert frames and frames[0].file_name == __file__ and frames[0].function_name == "_made_here"
    line = jaxpr_tools.source_line(eqns[0])
    assert line.startswith(f"{__file__}:") and line.endswith("(_made_here)")
    assert source_info.user_frames(object()) == []  # no recorded source: no frames, no error
