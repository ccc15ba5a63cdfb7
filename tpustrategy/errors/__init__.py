"""Exception classes (``tps.errors``)."""

from tpustrategy._src.errors import DataLossError as DataLossError
from tpustrategy._src.errors import DeadlineExceededError as DeadlineExceededError
