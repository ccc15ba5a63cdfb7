"""TensorFlow's ``tf.io`` input-pipeline ops as NumPy functions (``tps.io``).

For ``Dataset.map`` functions and anywhere else: strings are ``bytes`` (or object arrays
of ``bytes``), results are NumPy arrays; nothing here imports JAX. Image codecs need
``pip install 'tpustrategy[images]'``.
"""

from tpustrategy._src.io.csv_ops import decode_csv as decode_csv
from tpustrategy._src.io.files import match_filenames_once as match_filenames_once
from tpustrategy._src.io.files import matching_files as matching_files
from tpustrategy._src.io.files import read_file as read_file
from tpustrategy._src.io.files import write_file as write_file
from tpustrategy._src.io.image_ops import decode_and_crop_jpeg as decode_and_crop_jpeg
from tpustrategy._src.io.image_ops import decode_bmp as decode_bmp
from tpustrategy._src.io.image_ops import decode_gif as decode_gif
from tpustrategy._src.io.image_ops import decode_image as decode_image
from tpustrategy._src.io.image_ops import decode_jpeg as decode_jpeg
from tpustrategy._src.io.image_ops import decode_png as decode_png
from tpustrategy._src.io.image_ops import encode_jpeg as encode_jpeg
from tpustrategy._src.io.image_ops import encode_png as encode_png
from tpustrategy._src.io.image_ops import extract_jpeg_shape as extract_jpeg_shape
from tpustrategy._src.io.jpeg_check import is_jpeg as is_jpeg
from tpustrategy._src.io.json_example import decode_json_example as decode_json_example
from tpustrategy._src.io.raw import decode_raw as decode_raw
from tpustrategy._src.io.sparse_serialization import (
    deserialize_many_sparse as deserialize_many_sparse,
)
from tpustrategy._src.io.sparse_serialization import serialize_many_sparse as serialize_many_sparse
from tpustrategy._src.io.sparse_serialization import serialize_sparse as serialize_sparse
from tpustrategy._src.io.tensor_proto import parse_tensor as parse_tensor
from tpustrategy._src.io.tensor_proto import serialize_tensor as serialize_tensor
from tpustrategy._src.io.text_ops import decode_base64 as decode_base64
from tpustrategy._src.io.text_ops import decode_compressed as decode_compressed
from tpustrategy._src.io.text_ops import encode_base64 as encode_base64
from tpustrategy._src.not_provided import not_provided as _not_provided

# tf.io's Example parsing and TFRecord writing are tpsd's (the same objects).
from tpustrategy.data import FixedLenFeature as FixedLenFeature
from tpustrategy.data import FixedLenSequenceFeature as FixedLenSequenceFeature
from tpustrategy.data import RaggedFeature as RaggedFeature
from tpustrategy.data import SparseFeature as SparseFeature
from tpustrategy.data import TFRecordWriter as TFRecordWriter
from tpustrategy.data import VarLenFeature as VarLenFeature
from tpustrategy.data import parse_example as parse_example
from tpustrategy.data import parse_sequence_example as parse_sequence_example
from tpustrategy.data import parse_single_example as parse_single_example
from tpustrategy.data import parse_single_sequence_example as parse_single_sequence_example
from tpustrategy.io import gfile as gfile

# TensorFlow names without a counterpart (README, "TensorFlow names we do not have").
TFRecordOptions = _not_provided("tf.io.TFRecordOptions")
decode_jxl = _not_provided("tf.io.decode_jxl")
decode_proto = _not_provided("tf.io.decode_proto")
decode_webp = _not_provided("tf.io.decode_webp")
encode_proto = _not_provided("tf.io.encode_proto")
write_graph = _not_provided("tf.io.write_graph")
