"""``tf.config.threading`` (``tps.config.threading``): thread-pool sizes, recorded before JAX starts."""

from tpustrategy._src.devices.runtime_config import (
    get_inter_op_parallelism_threads as get_inter_op_parallelism_threads,
)
from tpustrategy._src.devices.runtime_config import (
    get_intra_op_parallelism_threads as get_intra_op_parallelism_threads,
)
from tpustrategy._src.devices.runtime_config import (
    set_inter_op_parallelism_threads as set_inter_op_parallelism_threads,
)
from tpustrategy._src.devices.runtime_config import (
    set_intra_op_parallelism_threads as set_intra_op_parallelism_threads,
)
