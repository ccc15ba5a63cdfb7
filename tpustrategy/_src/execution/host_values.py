"""Multi-host: per-replica values built on the host, and the processes' agreement on their shapes.

Each process holds only its own replicas' components of a host-built
``PerReplica`` (``experimental_distribute_values_from_function``, a list of
NumPy arrays). Before such values enter a program every process must know
every replica's shape, so all of them build the same (uniform or ragged)
program: one all-gather of the shapes does it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.replica import across_processes
from tpustrategy._src.values import regroup
from tpustrategy._src.values.distributed import PerReplica


def agree_on_shapes(tree: Any) -> None:
    """Multi-host: per-replica values built on the host learn every replica's shape.

    Each process holds only its replicas' components. One all-gather of their
    shapes gives every process the job's per-replica shapes, so all of them
    build the same (uniform or ragged) program.
    """
    host_built = [
        leaf for leaf in regroup.flatten(tree)[0]
        if isinstance(leaf, PerReplica) and not leaf.has_stacked and not leaf.is_traced
    ]
    if not host_built:
        return
    local = [np.shape(c) for leaf in host_built for c in leaf.values]
    flat = np.asarray([len(local)] + [len(s) for s in local] + [d for s in local for d in s], np.int64)
    sizes = across_processes.allgather(np.int64(flat.size))
    width = int(sizes.max())
    every = across_processes.allgather(np.pad(flat, (0, width - flat.size)))
    per_process = []
    for row in every:
        count = int(row[0])
        ranks = row[1:1 + count].tolist()
        dims, shapes, pos = row[1 + count:], [], 0
        for r in ranks:
            shapes.append(tuple(int(d) for d in dims[pos:pos + r]))
            pos += r
        per_process.append(shapes)
    if len({len(p) for p in per_process}) > 1:
        raise ValueError(
            "strategy.run: the processes of the job passed different numbers of per-replica components "
            f"({[len(p) for p in per_process]}); every process must call run with the same structure."
        )
    offset = 0
    for leaf in host_built:
        k = len(leaf.values)
        leaf.set_global_shapes([s for p in per_process for s in p[offset:offset + k]])
        offset += k
