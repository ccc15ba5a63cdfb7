"""Optimizers over ``tps.Variable``s built on optax (``tf.keras.optimizers`` counterparts)."""

from tpustrategy._src.optimizers.keras import SGD as SGD
from tpustrategy._src.optimizers.keras import Adam as Adam
from tpustrategy._src.optimizers.keras import AdamW as AdamW
from tpustrategy._src.optimizers.optimizer import Optimizer as Optimizer
