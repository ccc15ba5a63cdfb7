"""Keras 3 (JAX backend) under tpustrategy: the strategy's scope, trainer, custom loops, checkpoints.

Nothing here is imported unless the user imported Keras: ``Strategy.scope()``
calls ``scope_hook`` (``hook``) only when ``"keras"`` is in ``sys.modules``. Inside the
scope Keras's current distribution is the strategy's (``distribution``), each
new Keras variable becomes the strategy's (``variables``), and Keras's
``fit``/``evaluate``/``predict``, optimizers, callbacks and checkpoints learn the
strategy's rules (``patches``, ``trainer``, ``data``, ``steps``, ``callbacks``, ``checkpoint``).
The modules import each other, never this package (no circle through it).
"""

from tpustrategy._src.keras.hook import dataset_hook as dataset_hook
from tpustrategy._src.keras.hook import keras_backend as keras_backend
from tpustrategy._src.keras.hook import scope_hook as scope_hook
