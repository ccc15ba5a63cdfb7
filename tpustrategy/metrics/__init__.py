"""Streaming metrics over sync-on-read variables (``tf.keras.metrics`` counterparts)."""

from tpustrategy._src.metrics.accuracy import Accuracy as Accuracy
from tpustrategy._src.metrics.accuracy import CategoricalAccuracy as CategoricalAccuracy
from tpustrategy._src.metrics.accuracy import SparseCategoricalAccuracy as SparseCategoricalAccuracy
from tpustrategy._src.metrics.base import Metric as Metric
from tpustrategy._src.metrics.reduce import Mean as Mean
from tpustrategy._src.metrics.reduce import Sum as Sum
from tpustrategy._src.metrics.regression import MeanSquaredError as MeanSquaredError
from tpustrategy._src.metrics.wrapper import MeanMetricWrapper as MeanMetricWrapper
