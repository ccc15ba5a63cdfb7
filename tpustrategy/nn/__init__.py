"""Loss helpers for data-parallel training (``tf.nn`` counterparts)."""

from tpustrategy._src.losses import compute_average_loss as compute_average_loss
from tpustrategy._src.losses import scale_regularization_loss as scale_regularization_loss
