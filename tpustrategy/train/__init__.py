"""``tf.train`` counterparts (``tps.train``): checkpoints of training state.

``Checkpoint`` saves and restores variables, arrays and pytrees (flax/optax
state), input iterators (including distributed ones) and Python numbers;
``CheckpointManager`` numbers, keeps and finds them; ``latest_checkpoint``
finds the newest complete one in a folder. Array data is written by
orbax-checkpoint (``pip install 'tpustrategy[checkpoint]'``).
"""

from tpustrategy._src.checkpoint.checkpoint import Checkpoint as Checkpoint
from tpustrategy._src.checkpoint.inspection import CheckpointReader as CheckpointReader
from tpustrategy._src.checkpoint.inspection import list_variables as list_variables
from tpustrategy._src.checkpoint.inspection import load_checkpoint as load_checkpoint
from tpustrategy._src.checkpoint.inspection import load_variable as load_variable
from tpustrategy._src.checkpoint.manager import CheckpointManager as CheckpointManager
from tpustrategy._src.checkpoint.manager import latest_checkpoint as latest_checkpoint
from tpustrategy._src.checkpoint.options import CheckpointOptions as CheckpointOptions
from tpustrategy._src.checkpoint.status import CheckpointLoadStatus as CheckpointLoadStatus
from tpustrategy._src.checkpoint.tf_format.object_graph import CheckpointView as CheckpointView
from tpustrategy._src.checkpoint.watch import checkpoints_iterator as checkpoints_iterator
from tpustrategy._src.checkpoint.watch import get_checkpoint_state as get_checkpoint_state
from tpustrategy._src.cluster.cluster_spec import ClusterSpec as ClusterSpec
from tpustrategy._src.data.parsing.example_proto import BytesList as BytesList
from tpustrategy._src.data.parsing.example_proto import Example as Example
from tpustrategy._src.data.parsing.example_proto import Feature as Feature
from tpustrategy._src.data.parsing.example_proto import FeatureList as FeatureList
from tpustrategy._src.data.parsing.example_proto import FeatureLists as FeatureLists
from tpustrategy._src.data.parsing.example_proto import Features as Features
from tpustrategy._src.data.parsing.example_proto import FloatList as FloatList
from tpustrategy._src.data.parsing.example_proto import Int64List as Int64List
from tpustrategy._src.data.parsing.example_proto import SequenceExample as SequenceExample
from tpustrategy._src.not_provided import not_provided as _not_provided

experimental = _not_provided("tf.train.experimental")
