"""The spec of an element whose leaves are datasets (``window``'s elements).

TensorFlow describes such a leaf with ``tf.data.DatasetSpec(element_spec)``;
`dataset_spec_nest` builds that nest from the input's element spec.
"""

from __future__ import annotations

from typing import Any

from tpustrategy._src.data.core.specs import DatasetSpec
from tpustrategy._src.data.core.structure import map_structure


def dataset_spec_nest(spec: Any) -> Any:
    """``spec`` with every `TensorSpec` leaf replaced by the `DatasetSpec` of a dataset of it."""
    return map_structure(DatasetSpec, spec)
