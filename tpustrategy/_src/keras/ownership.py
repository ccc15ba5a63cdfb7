"""Which strategy a Keras object belongs to: its adopted variables' or the one it was created under."""

from __future__ import annotations

from typing import Any

import tpustrategy._src.keras.variables as variables_lib
from tpustrategy._src.context import contracts


def strategy_of(variables: Any, include_default: bool = False) -> Any:
    """The strategy of the first adopted Keras variable in ``variables`` (None if none).

    Variables made outside any scope belong to the default strategy; they count only with
    ``include_default`` (Keras's own ``fit`` keeps running such a model as plain Keras).
    """
    found_default = None
    for v in variables or ():
        state = variables_lib.state_of(v) if v is not None else None
        if state is not None and state._strategy is not None:
            if not contracts.is_default(state.strategy):
                return state._strategy
            found_default = state._strategy
    return found_default if include_default else None


def layer_strategy(layer: Any) -> Any:
    """The non-default strategy a Keras layer or model was created under (None when none)."""
    found = getattr(layer, "__dict__", {}).get("_tps_strategy")
    return None if found is None or contracts.is_default(found) else found
