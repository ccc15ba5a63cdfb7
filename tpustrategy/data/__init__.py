"""The tf.data surface of tpustrategy (``import tpustrategy.data as tpsd``).

Pure Python and NumPy: importing it never imports JAX.
"""

from tpustrategy._src.data.core.dataset import Dataset as Dataset
from tpustrategy._src.data.core.iterator import DatasetIterator as DatasetIterator
from tpustrategy._src.data.core.iterator import Iterator as Iterator
from tpustrategy._src.data.core.iterator import NumpyIterator as NumpyIterator
from tpustrategy._src.data.core.options import AUTOTUNE as AUTOTUNE
from tpustrategy._src.data.core.options import INFINITE_CARDINALITY as INFINITE_CARDINALITY
from tpustrategy._src.data.core.options import SHARD_HINT as SHARD_HINT
from tpustrategy._src.data.core.options import UNKNOWN_CARDINALITY as UNKNOWN_CARDINALITY
from tpustrategy._src.data.core.options import AutoShardPolicy as AutoShardPolicy
from tpustrategy._src.data.core.options import DistributeOptions as DistributeOptions
from tpustrategy._src.data.core.options import Options as Options
from tpustrategy._src.data.core.options import ThreadingOptions as ThreadingOptions
from tpustrategy._src.data.core.specs import DatasetSpec as DatasetSpec
from tpustrategy._src.data.core.specs import IteratorSpec as IteratorSpec
from tpustrategy._src.data.core.structure import TensorSpec as TensorSpec
from tpustrategy._src.data.parsing.example import FixedLenFeature as FixedLenFeature
from tpustrategy._src.data.parsing.example import VarLenFeature as VarLenFeature
from tpustrategy._src.data.parsing.example import parse_example as parse_example
from tpustrategy._src.data.parsing.example import parse_single_example as parse_single_example
from tpustrategy._src.data.parsing.example_proto import BytesList as BytesList
from tpustrategy._src.data.parsing.example_proto import Example as Example
from tpustrategy._src.data.parsing.example_proto import Feature as Feature
from tpustrategy._src.data.parsing.example_proto import FeatureList as FeatureList
from tpustrategy._src.data.parsing.example_proto import FeatureLists as FeatureLists
from tpustrategy._src.data.parsing.example_proto import Features as Features
from tpustrategy._src.data.parsing.example_proto import FloatList as FloatList
from tpustrategy._src.data.parsing.example_proto import Int64List as Int64List
from tpustrategy._src.data.parsing.example_proto import SequenceExample as SequenceExample
from tpustrategy._src.data.parsing.example_proto import make_example as make_example
from tpustrategy._src.data.parsing.feature_kinds import (
    FixedLenSequenceFeature as FixedLenSequenceFeature,
)
from tpustrategy._src.data.parsing.feature_kinds import RaggedFeature as RaggedFeature
from tpustrategy._src.data.parsing.feature_kinds import RaggedTensorValue as RaggedTensorValue
from tpustrategy._src.data.parsing.feature_kinds import SparseFeature as SparseFeature
from tpustrategy._src.data.parsing.sequence_example import (
    parse_sequence_example as parse_sequence_example,
)
from tpustrategy._src.data.parsing.sequence_example import (
    parse_single_sequence_example as parse_single_sequence_example,
)
from tpustrategy._src.data.sources.readers import (
    FixedLengthRecordDataset as FixedLengthRecordDataset,
)
from tpustrategy._src.data.sources.readers import TextLineDataset as TextLineDataset
from tpustrategy._src.data.sources.readers import TFRecordDataset as TFRecordDataset
from tpustrategy._src.data.sources.writer import TFRecordWriter as TFRecordWriter
from tpustrategy._src.data.transformations.ragged_batch import RaggedBatch as RaggedBatch
from tpustrategy._src.data.transformations.sparse_batch import SparseBatch as SparseBatch
from tpustrategy.data import experimental as experimental
