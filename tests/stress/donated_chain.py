"""A chain of programs that each donate their input, queued behind a long collective program.

Run as a script by ``test_in_flight_bound.py``: ``python donated_chain.py STEPS LOOP`` prints
``RESULT <final value>``. One program (``LOOP`` matrix products, then an all-reduce) runs for
a few seconds on 8 CPU devices; meanwhile ``STEPS`` programs are dispatched, each adding 32 to a
state it donates to the next, each recorded with ``dispatch.track`` by its output — which the
next program deletes. Without a working bound on programs in flight, more than ~32 of them
queue up and XLA's CPU client aborts the process (exit 134, "only 6 of them arrived").
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tpustrategy._src.execution import dispatch


def main(steps, loop):
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("replica",))
    split, whole = NamedSharding(mesh, P("replica")), NamedSharding(mesh, P())
    w = jax.device_put(np.eye(256, dtype=np.float32), whole)

    @jax.jit
    def long(x):
        x = jax.lax.fori_loop(0, loop, lambda i, x: x + jnp.tanh(x @ w) * 0.01, x)
        return jax.lax.with_sharding_constraint(x.sum(0, keepdims=True), whole)  # an all-reduce

    step = jax.jit(lambda s, v: (s + v.sum(),), donate_argnums=0, out_shardings=(whole,))
    x = jax.device_put(np.ones((8 * 256, 256), np.float32), split)
    v = jax.device_put(np.ones((8, 4), np.float32), split)   # sums to 32
    long(x).block_until_ready()                               # compiled before the timed part
    (s,) = step(jax.device_put(np.zeros((), np.float32), whole), v)
    s.block_until_ready()

    out = long(x)
    dispatch.track(out)
    for _ in range(steps):
        (s,) = step(s, v)   # donates the previous state: the output tracked last time is deleted
        dispatch.track(s)
    jax.block_until_ready((out, s))
    print(f"RESULT {float(s)}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
