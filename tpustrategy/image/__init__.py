"""Image ops (``tf.image`` counterparts, ``tps.image``): NumPy only, for ``tpsd`` pipelines."""

from tpustrategy._src.image.resize import ResizeMethod as ResizeMethod
from tpustrategy._src.image.resize import resize as resize
