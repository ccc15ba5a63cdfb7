"""The primitive ``jax_shims.rule_tables`` registers: JAX's rule tables are where the shim puts it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tpustrategy._src.jax_shims import rule_tables


def test_an_identity_primitive_differentiates_batches_and_lowers_through_jaxs_rule_tables():
    from jax.interpreters import ad, batching, mlir

    for table in (ad.primitive_jvps, ad.primitive_transposes, batching.primitive_batchers):
        assert hasattr(table, "__setitem__")
    assert callable(mlir.register_lowering) and ad.Zero is not None
    seen = []
    tag = rule_tables.identity_primitive("tps_test_tag", "tag", lambda v, d: seen.append(d) or v)
    f = lambda x: jnp.sum(tag.bind(x, tag="t") ** 2)  # noqa: E731
    np.testing.assert_allclose(np.asarray(jax.jit(jax.grad(f))(jnp.arange(3.0))), [0.0, 2.0, 4.0])
    np.testing.assert_allclose(np.asarray(jax.vmap(lambda x: tag.bind(x, tag="t"))(jnp.ones((2, 3)))),
                               np.ones((2, 3)))
    assert seen == [0]
