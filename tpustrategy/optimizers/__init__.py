"""Optimizers over ``tps.Variable``s built on optax (``tf.keras.optimizers`` counterparts)."""

from tpustrategy._src.optimizers.keras import SGD as SGD
from tpustrategy._src.optimizers.keras import Adam as Adam
from tpustrategy._src.optimizers.keras import AdamW as AdamW
from tpustrategy._src.optimizers.more import Adadelta as Adadelta
from tpustrategy._src.optimizers.more import Adafactor as Adafactor
from tpustrategy._src.optimizers.more import Adagrad as Adagrad
from tpustrategy._src.optimizers.more import Adamax as Adamax
from tpustrategy._src.optimizers.more import Ftrl as Ftrl
from tpustrategy._src.optimizers.more import Lion as Lion
from tpustrategy._src.optimizers.more import Nadam as Nadam
from tpustrategy._src.optimizers.more import RMSprop as RMSprop
from tpustrategy._src.optimizers.optimizer import Optimizer as Optimizer
