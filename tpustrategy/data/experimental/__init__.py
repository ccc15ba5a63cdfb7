"""``tf.data.experimental`` names (``tpsd.experimental``)."""

from tpustrategy._src.data.options import AUTOTUNE as AUTOTUNE
from tpustrategy._src.data.options import INFINITE_CARDINALITY as INFINITE_CARDINALITY
from tpustrategy._src.data.options import SHARD_HINT as SHARD_HINT
from tpustrategy._src.data.options import UNKNOWN_CARDINALITY as UNKNOWN_CARDINALITY
from tpustrategy._src.data.options import AutoShardPolicy as AutoShardPolicy
from tpustrategy._src.data.options import DistributeOptions as DistributeOptions
from tpustrategy._src.input.autoshard import auto_shard_dataset as auto_shard_dataset
