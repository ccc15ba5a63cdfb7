"""``tf.data.experimental`` names (``tpsd.experimental``)."""

from tpustrategy._src.data.counter import Counter as Counter
from tpustrategy._src.data.csv_dataset import CsvDataset as CsvDataset
from tpustrategy._src.data.directed_interleave import choose_from_datasets as choose_from_datasets
from tpustrategy._src.data.directed_interleave import sample_from_datasets as sample_from_datasets
from tpustrategy._src.data.options import AUTOTUNE as AUTOTUNE
from tpustrategy._src.data.options import INFINITE_CARDINALITY as INFINITE_CARDINALITY
from tpustrategy._src.data.options import SHARD_HINT as SHARD_HINT
from tpustrategy._src.data.options import UNKNOWN_CARDINALITY as UNKNOWN_CARDINALITY
from tpustrategy._src.data.options import AutoShardPolicy as AutoShardPolicy
from tpustrategy._src.data.options import AutotuneAlgorithm as AutotuneAlgorithm
from tpustrategy._src.data.options import AutotuneOptions as AutotuneOptions
from tpustrategy._src.data.options import DistributeOptions as DistributeOptions
from tpustrategy._src.data.options import ExternalStatePolicy as ExternalStatePolicy
from tpustrategy._src.data.options import OptimizationOptions as OptimizationOptions
from tpustrategy._src.data.options import ThreadingOptions as ThreadingOptions
from tpustrategy._src.data.random_dataset import RandomDataset as RandomDataset
from tpustrategy._src.data.writer import TFRecordWriter as TFRecordWriter
from tpustrategy._src.input.autoshard import auto_shard_dataset as auto_shard_dataset
