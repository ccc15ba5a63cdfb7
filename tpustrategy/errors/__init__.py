"""Exception classes (``tps.errors``)."""

from tpustrategy._src.errors import DataLossError as DataLossError
from tpustrategy._src.errors import DeadlineExceededError as DeadlineExceededError
from tpustrategy._src.errors import OutOfRangeError as OutOfRangeError
from tpustrategy._src.errors import UnavailableError as UnavailableError
