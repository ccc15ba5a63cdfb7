"""Global settings and devices (``tps.config``, ``tf.config``'s counterparts)."""

from tpustrategy._src.cluster.connect import (
    experimental_connect_to_cluster as experimental_connect_to_cluster,
)
from tpustrategy._src.cluster.connect import (
    experimental_connect_to_host as experimental_connect_to_host,
)
from tpustrategy._src.config import functions_run_eagerly as functions_run_eagerly
from tpustrategy._src.config import run_functions_eagerly as run_functions_eagerly
from tpustrategy._src.devices.logical import LogicalDevice as LogicalDevice
from tpustrategy._src.devices.logical import (
    LogicalDeviceConfiguration as LogicalDeviceConfiguration,
)
from tpustrategy._src.devices.logical import PhysicalDevice as PhysicalDevice
from tpustrategy._src.devices.logical import (
    get_logical_device_configuration as get_logical_device_configuration,
)
from tpustrategy._src.devices.logical import list_logical_devices as list_logical_devices
from tpustrategy._src.devices.logical import list_physical_devices as list_physical_devices
from tpustrategy._src.devices.logical import (
    set_logical_device_configuration as set_logical_device_configuration,
)
from tpustrategy._src.devices.runtime_config import (
    get_soft_device_placement as get_soft_device_placement,
)
from tpustrategy._src.devices.runtime_config import get_visible_devices as get_visible_devices
from tpustrategy._src.devices.runtime_config import (
    set_soft_device_placement as set_soft_device_placement,
)
from tpustrategy._src.devices.runtime_config import set_visible_devices as set_visible_devices
from tpustrategy.config import experimental as experimental
from tpustrategy.config import threading as threading
