"""The tf.data surface of tpustrategy (``import tpustrategy.data as tpsd``).

Pure Python and NumPy: importing it never imports JAX.
"""

from tpustrategy._src.data.dataset import Dataset as Dataset
from tpustrategy._src.data.example_proto import BytesList as BytesList
from tpustrategy._src.data.example_proto import Example as Example
from tpustrategy._src.data.example_proto import Feature as Feature
from tpustrategy._src.data.example_proto import Features as Features
from tpustrategy._src.data.example_proto import FloatList as FloatList
from tpustrategy._src.data.example_proto import Int64List as Int64List
from tpustrategy._src.data.example_proto import make_example as make_example
from tpustrategy._src.data.iterator import DatasetIterator as DatasetIterator
from tpustrategy._src.data.iterator import Iterator as Iterator
from tpustrategy._src.data.iterator import NumpyIterator as NumpyIterator
from tpustrategy._src.data.options import AUTOTUNE as AUTOTUNE
from tpustrategy._src.data.options import INFINITE_CARDINALITY as INFINITE_CARDINALITY
from tpustrategy._src.data.options import SHARD_HINT as SHARD_HINT
from tpustrategy._src.data.options import UNKNOWN_CARDINALITY as UNKNOWN_CARDINALITY
from tpustrategy._src.data.options import AutoShardPolicy as AutoShardPolicy
from tpustrategy._src.data.options import DistributeOptions as DistributeOptions
from tpustrategy._src.data.options import Options as Options
from tpustrategy._src.data.options import ThreadingOptions as ThreadingOptions
from tpustrategy._src.data.parsing import FixedLenFeature as FixedLenFeature
from tpustrategy._src.data.parsing import VarLenFeature as VarLenFeature
from tpustrategy._src.data.parsing import parse_example as parse_example
from tpustrategy._src.data.parsing import parse_single_example as parse_single_example
from tpustrategy._src.data.ragged_batch import RaggedBatch as RaggedBatch
from tpustrategy._src.data.readers import FixedLengthRecordDataset as FixedLengthRecordDataset
from tpustrategy._src.data.readers import TextLineDataset as TextLineDataset
from tpustrategy._src.data.readers import TFRecordDataset as TFRecordDataset
from tpustrategy._src.data.sparse_batch import SparseBatch as SparseBatch
from tpustrategy._src.data.specs import DatasetSpec as DatasetSpec
from tpustrategy._src.data.specs import IteratorSpec as IteratorSpec
from tpustrategy._src.data.structure import TensorSpec as TensorSpec
from tpustrategy._src.data.writer import TFRecordWriter as TFRecordWriter
from tpustrategy.data import experimental as experimental
