"""``tf.data.experimental`` names (``tpsd.experimental``)."""

from tpustrategy._src.data.core.optional import Optional as Optional
from tpustrategy._src.data.core.optional import get_next_as_optional as get_next_as_optional
from tpustrategy._src.data.core.options import AUTOTUNE as AUTOTUNE
from tpustrategy._src.data.core.options import INFINITE_CARDINALITY as INFINITE_CARDINALITY
from tpustrategy._src.data.core.options import SHARD_HINT as SHARD_HINT
from tpustrategy._src.data.core.options import UNKNOWN_CARDINALITY as UNKNOWN_CARDINALITY
from tpustrategy._src.data.core.options import AutoShardPolicy as AutoShardPolicy
from tpustrategy._src.data.core.options import AutotuneAlgorithm as AutotuneAlgorithm
from tpustrategy._src.data.core.options import AutotuneOptions as AutotuneOptions
from tpustrategy._src.data.core.options import DistributeOptions as DistributeOptions
from tpustrategy._src.data.core.options import ExternalStatePolicy as ExternalStatePolicy
from tpustrategy._src.data.core.options import OptimizationOptions as OptimizationOptions
from tpustrategy._src.data.core.options import ThreadingOptions as ThreadingOptions
from tpustrategy._src.data.parallel.processes import ThreadFallbackWarning as ThreadFallbackWarning
from tpustrategy._src.data.parallel.processes import WorkerCrashedError as WorkerCrashedError
from tpustrategy._src.data.parsing.batched_features import (
    make_batched_features_dataset as make_batched_features_dataset,
)
from tpustrategy._src.data.parsing.batched_features import (
    parse_example_dataset as parse_example_dataset,
)
from tpustrategy._src.data.sources.counter import Counter as Counter
from tpustrategy._src.data.sources.csv_dataset import CsvDataset as CsvDataset
from tpustrategy._src.data.sources.make_csv_dataset import make_csv_dataset as make_csv_dataset
from tpustrategy._src.data.sources.random_dataset import RandomDataset as RandomDataset
from tpustrategy._src.data.sources.writer import TFRecordWriter as TFRecordWriter
from tpustrategy._src.data.transformations.dataset_functions import at as at
from tpustrategy._src.data.transformations.dataset_functions import cardinality as cardinality
from tpustrategy._src.data.transformations.dataset_functions import (
    choose_from_datasets as choose_from_datasets,
)
from tpustrategy._src.data.transformations.dataset_functions import (
    enable_debug_mode as enable_debug_mode,
)
from tpustrategy._src.data.transformations.dataset_functions import from_list as from_list
from tpustrategy._src.data.transformations.dataset_functions import get_structure as get_structure
from tpustrategy._src.data.transformations.dataset_functions import load as load
from tpustrategy._src.data.transformations.dataset_functions import (
    rejection_resample as rejection_resample,
)
from tpustrategy._src.data.transformations.dataset_functions import (
    sample_from_datasets as sample_from_datasets,
)
from tpustrategy._src.data.transformations.dataset_functions import save as save
from tpustrategy._src.data.transformations.dataset_functions import (
    shuffle_and_repeat as shuffle_and_repeat,
)
from tpustrategy._src.data.transformations.dataset_functions import snapshot as snapshot
from tpustrategy._src.data.transformations.dataset_functions import unbatch as unbatch
from tpustrategy._src.data.transformations.experimental_ops import (
    assert_cardinality as assert_cardinality,
)
from tpustrategy._src.data.transformations.experimental_ops import (
    bucket_by_sequence_length as bucket_by_sequence_length,
)
from tpustrategy._src.data.transformations.experimental_ops import (
    dense_to_ragged_batch as dense_to_ragged_batch,
)
from tpustrategy._src.data.transformations.experimental_ops import (
    dense_to_sparse_batch as dense_to_sparse_batch,
)
from tpustrategy._src.data.transformations.experimental_ops import (
    enumerate_dataset as enumerate_dataset,
)
from tpustrategy._src.data.transformations.experimental_ops import (
    get_single_element as get_single_element,
)
from tpustrategy._src.data.transformations.experimental_ops import (
    group_by_reducer as group_by_reducer,
)
from tpustrategy._src.data.transformations.experimental_ops import (
    group_by_window as group_by_window,
)
from tpustrategy._src.data.transformations.experimental_ops import ignore_errors as ignore_errors
from tpustrategy._src.data.transformations.experimental_ops import map_and_batch as map_and_batch
from tpustrategy._src.data.transformations.experimental_ops import (
    pad_to_cardinality as pad_to_cardinality,
)
from tpustrategy._src.data.transformations.experimental_ops import (
    parallel_interleave as parallel_interleave,
)
from tpustrategy._src.data.transformations.experimental_ops import scan as scan
from tpustrategy._src.data.transformations.experimental_ops import take_while as take_while
from tpustrategy._src.data.transformations.experimental_ops import unique as unique
from tpustrategy._src.data.transformations.group_by_reducer import Reducer as Reducer
from tpustrategy._src.input.autoshard import auto_shard_dataset as auto_shard_dataset
from tpustrategy._src.input.device_prefetch import copy_to_device as copy_to_device
from tpustrategy._src.input.device_prefetch import prefetch_to_device as prefetch_to_device
from tpustrategy._src.lookup.from_dataset import DatasetInitializer as DatasetInitializer
from tpustrategy._src.lookup.from_dataset import (
    index_table_from_dataset as index_table_from_dataset,
)
from tpustrategy._src.lookup.from_dataset import table_from_dataset as table_from_dataset
