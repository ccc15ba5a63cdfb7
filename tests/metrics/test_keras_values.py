"""tps.metrics give Keras's numbers: the documented examples, sample weights, resets, errors.

Each value is either the example in the Keras documentation of that metric
(``tf.keras.metrics.X``) or computed by hand below the test's name. The same
checks run without a strategy and in cross-replica code under a strategy over
every device (8 replicas, or 1 with ``--devices 1``), where every update lands on
the sync-on-read aggregate.
"""

from __future__ import annotations

import contextlib

import jax
import numpy as np
import pytest

import tpustrategy as tps

KERAS_DOC_EXAMPLES = [
    # (metric, update_state args, result, sample_weight, weighted result)
    ("Mean", ([1, 3, 5, 7],), 4.0, [1, 1, 0, 0], 2.0),
    ("Sum", ([1, 3, 5, 7],), 16.0, [1, 0, 2, 0], 11.0),
    ("Accuracy", ([[1], [2], [3], [4]], [[0], [2], [3], [4]]), 0.75, [1, 1, 0, 0], 0.5),
    ("SparseCategoricalAccuracy", ([[2], [1]], [[0.1, 0.6, 0.3], [0.05, 0.95, 0]]), 0.5, [0.7, 0.3], 0.3),
    ("CategoricalAccuracy", ([[0, 0, 1], [0, 1, 0]], [[0.1, 0.9, 0.8], [0.05, 0.95, 0]]), 0.5, [0.7, 0.3], 0.3),
    ("MeanSquaredError", ([[0, 1], [0, 0]], [[1, 1], [0, 0]]), 0.25, [1, 0], 0.5),
]


@pytest.fixture(params=["no_strategy", "cross_replica"])
def where(request):
    """Creates and updates metrics with no strategy, or under the scope of a strategy over every device."""
    if request.param == "no_strategy":
        yield contextlib.nullcontext
    else:
        strategy = tps.MirroredStrategy()
        yield strategy.scope


@pytest.mark.parametrize("name,args,expected,weights,weighted", KERAS_DOC_EXAMPLES,
                         ids=[c[0] for c in KERAS_DOC_EXAMPLES])
def test_each_metric_gives_the_keras_documented_result(where, name, args, expected, weights, weighted):
    with where():
        metric = getattr(tps.metrics, name)()
        metric.update_state(*args)
        assert float(metric.result()) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("name,args,expected,weights,weighted", KERAS_DOC_EXAMPLES,
                         ids=[c[0] for c in KERAS_DOC_EXAMPLES])
def test_each_metric_gives_the_keras_documented_weighted_result(where, name, args, expected, weights, weighted):
    with where():
        metric = getattr(tps.metrics, name)()
        metric.update_state(*args, sample_weight=weights)
        assert float(metric.result()) == pytest.approx(weighted, rel=1e-6)


@pytest.mark.parametrize("name,args,expected,weights,weighted", KERAS_DOC_EXAMPLES,
                         ids=[c[0] for c in KERAS_DOC_EXAMPLES])
def test_reset_state_starts_the_metric_over(where, name, args, expected, weights, weighted):
    with where():
        metric = getattr(tps.metrics, name)()
        metric.update_state(*args, sample_weight=weights)
        metric.reset_state()
        assert float(metric.result()) == 0.0
        metric.update_state(*args)
        assert float(metric.result()) == pytest.approx(expected, rel=1e-6)
        metric.reset_states()  # the Keras 2 spelling
        assert all(float(v.read_value()) == 0.0 for v in metric.variables)


def test_updates_accumulate_across_batches(where):
    # (1 + 2 + 3) / 3 = 2
    with where():
        m = tps.metrics.Mean()
        m.update_state([1.0, 2.0])
        m.update_state(3.0)
        assert float(m.result()) == 2.0


def test_calling_a_metric_updates_it_and_returns_the_result(where):
    with where():
        acc = tps.metrics.Accuracy()
        assert float(acc([1, 2], [1, 0])) == 0.5
        assert float(acc([3], [3])) == pytest.approx(2 / 3)


def test_a_metric_without_updates_reads_zero_not_nan(where):
    with where():
        assert float(tps.metrics.Mean().result()) == 0.0
        assert float(tps.metrics.SparseCategoricalAccuracy().result()) == 0.0


def test_an_empty_batch_changes_nothing(where):
    with where():
        m = tps.metrics.Mean()
        m.update_state(np.zeros((0,), np.float32))
        assert float(m.result()) == 0.0
        acc = tps.metrics.SparseCategoricalAccuracy()
        acc.update_state(np.zeros((0,), np.int32), np.zeros((0, 10), np.float32))
        acc.update_state([1], [[0.0, 1.0]])
        assert float(acc.result()) == 1.0


def test_one_weight_per_row_weighs_every_element_of_that_row():
    # [[1, 2], [3, 4]] with weights [1, 0]: the weights become [[1, 1], [0, 0]]: 3 / 2.
    m = tps.metrics.Mean()
    m.update_state([[1.0, 2.0], [3.0, 4.0]], sample_weight=[1.0, 0.0])
    assert float(m.result()) == 1.5


def test_weights_for_leading_dimensions_weigh_row_means_or_row_sums():
    # Row means 4 and 2 with weights 1 and 3: (4 + 6) / 4 = 2.5. Row sums 16 and 8: 16 + 24 = 40.
    values = [[[1.0, 3.0], [5.0, 7.0]], [[0.0, 0.0], [0.0, 8.0]]]
    mean, total = tps.metrics.Mean(), tps.metrics.Sum()
    mean.update_state(values, sample_weight=[1.0, 3.0])
    total.update_state(values, sample_weight=[1.0, 3.0])
    assert float(mean.result()) == 2.5
    assert float(total.result()) == 40.0


def test_a_scalar_weight_weighs_every_value():
    # (1 + 3) * 2 / (2 * 2) = 2
    m = tps.metrics.Mean()
    m.update_state([1.0, 3.0], sample_weight=2.0)
    assert float(m.result()) == 2.0
    assert float(m.count.read_value()) == 4.0


def test_sparse_labels_may_be_a_vector_and_ties_go_to_the_first_class():
    acc = tps.metrics.SparseCategoricalAccuracy()
    acc.update_state(np.asarray([0, 1, 1]), np.asarray([[0.5, 0.5], [0.5, 0.5], [0.2, 0.8]]))
    assert float(acc.result()) == pytest.approx(2 / 3)


def test_labels_with_a_squeezable_dimension_match_flat_predictions():
    acc = tps.metrics.Accuracy()
    acc.update_state([[1], [2], [3]], [1, 2, 0])
    assert float(acc.result()) == pytest.approx(2 / 3)


def test_mean_squared_error_of_flat_vectors_is_one_value_per_batch():
    # Keras averages over the last axis: [0, 1] vs [1, 1] is one example with error 0.5.
    mse = tps.metrics.MeanSquaredError()
    mse.update_state([0.0, 1.0], [1.0, 1.0])
    mse.update_state([0.0, 0.0], [0.0, 0.0])
    assert float(mse.result()) == 0.25
    assert float(mse.count.read_value()) == 2.0


def test_metrics_have_keras_names_and_a_total_and_count():
    assert [getattr(tps.metrics, n)().name for n, *_ in KERAS_DOC_EXAMPLES] == [
        "mean", "sum", "accuracy", "sparse_categorical_accuracy", "categorical_accuracy",
        "mean_squared_error"]
    assert tps.metrics.Mean(name="test_loss").name == "test_loss"
    assert [v.name for v in tps.metrics.Mean().variables] == ["total:0", "count:0"]
    assert [v.name for v in tps.metrics.Sum().variables] == ["total:0"]
    assert tps.metrics.Mean().result().dtype == np.float32


def test_metric_state_under_a_strategy_is_sync_on_read_and_summed():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        m = tps.metrics.SparseCategoricalAccuracy()
    for v in m.variables:
        assert v.synchronization is tps.VariableSynchronization.ON_READ
        assert v.aggregation is tps.VariableAggregation.SUM
        assert not v.trainable
        assert len(strategy.experimental_local_results(v)) == len(jax.devices())


def test_a_non_float_dtype_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"(?s)tps.metrics.Mean\('mean'\): got dtype='int32'.*Fix: pass one of"):
        tps.metrics.Mean(dtype="int32")


def test_accuracy_of_different_shapes_names_both_shapes():
    with pytest.raises(ValueError, match=r"y_true has shape \(2, 2\) and y_pred has shape \(2, 3\)"):
        tps.metrics.Accuracy().update_state(np.zeros((2, 2)), np.zeros((2, 3)))


def test_sparse_accuracy_with_one_hot_labels_points_to_categorical_accuracy():
    with pytest.raises(ValueError, match="use CategoricalAccuracy"):
        tps.metrics.SparseCategoricalAccuracy().update_state(np.eye(3), np.eye(3))


def test_sparse_accuracy_with_a_label_count_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"y_true has shape \(3,\) but y_pred has shape \(2, 4\)"):
        tps.metrics.SparseCategoricalAccuracy().update_state([1, 2, 3], np.zeros((2, 4)))


def test_sparse_accuracy_of_scalar_predictions_asks_for_class_scores():
    with pytest.raises(ValueError, match="pass the model's logits"):
        tps.metrics.SparseCategoricalAccuracy().update_state(1, 1)


def test_categorical_accuracy_of_mismatched_batches_points_to_sparse_accuracy():
    with pytest.raises(ValueError, match="use SparseCategoricalAccuracy"):
        tps.metrics.CategoricalAccuracy().update_state(np.eye(3), np.zeros((2, 3)))


def test_mean_squared_error_of_unbroadcastable_shapes_names_both_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(2, 4\).*do not broadcast"):
        tps.metrics.MeanSquaredError().update_state(np.zeros((2, 3)), np.zeros((2, 4)))


def test_a_sample_weight_that_fits_no_rule_names_both_shapes_and_the_fix():
    with pytest.raises(ValueError, match=r"(?s)sample_weight has shape \(3,\).*values' shape \(2,\).*Fix:"):
        tps.metrics.Mean().update_state([1.0, 2.0], sample_weight=[1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"sample_weight has shape \(2, 3\)"):
        tps.metrics.Mean().update_state([1.0, 2.0], sample_weight=np.ones((2, 3)))


def test_values_that_are_not_an_array_are_refused_naming_the_metric():
    with pytest.raises(TypeError, match=r"tps.metrics.Mean.update_state: values must be an array.*dict"):
        tps.metrics.Mean().update_state({"loss": 1.0})


class _Counter(tps.metrics.Metric):
    def __init__(self, initializer="ones"):
        super().__init__(name="counter")
        self.seen = self.add_weight("seen", shape=(2,), initializer=initializer)

    def update_state(self, values, sample_weight=None):
        self.seen.assign_add(np.asarray(values, np.float32))

    def result(self):
        return self.read_state(self.seen)


def test_a_custom_metric_takes_keras_initializers_and_resets_to_zero():
    counter = _Counter()
    counter.update_state([1.0, 2.0])
    assert np.asarray(counter.result()).tolist() == [2.0, 3.0]
    counter.reset_state()
    assert np.asarray(counter.result()).tolist() == [0.0, 0.0]
    assert np.asarray(_Counter(lambda shape, dtype: np.full(shape, 5, dtype)).result()).tolist() == [5.0, 5.0]


def test_an_unknown_initializer_is_named_with_the_choices():
    with pytest.raises(ValueError, match=r"(?s)unknown initializer 'glorot_uniform' for 'seen'.*'zeros', 'ones'"):
        _Counter("glorot_uniform")
