"""Global settings (``tps.config``)."""

from tpustrategy._src.config import functions_run_eagerly as functions_run_eagerly
from tpustrategy._src.config import run_functions_eagerly as run_functions_eagerly
