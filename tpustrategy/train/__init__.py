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
from tpustrategy._src.checkpoint.manager import CheckpointManager as CheckpointManager
from tpustrategy._src.checkpoint.manager import latest_checkpoint as latest_checkpoint
from tpustrategy._src.checkpoint.options import CheckpointOptions as CheckpointOptions
from tpustrategy._src.checkpoint.status import CheckpointLoadStatus as CheckpointLoadStatus
