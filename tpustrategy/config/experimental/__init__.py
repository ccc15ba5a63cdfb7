"""``tf.config.experimental``'s device names (``tps.config.experimental``)."""

from tpustrategy._src.devices.logical import (
    LogicalDeviceConfiguration as VirtualDeviceConfiguration,  # noqa: F401 - TensorFlow's older name
)
from tpustrategy._src.devices.logical import (
    get_logical_device_configuration as get_virtual_device_configuration,  # noqa: F401
)
from tpustrategy._src.devices.logical import list_logical_devices as list_logical_devices
from tpustrategy._src.devices.logical import list_physical_devices as list_physical_devices
from tpustrategy._src.devices.logical import (
    set_logical_device_configuration as set_virtual_device_configuration,  # noqa: F401
)
from tpustrategy._src.devices.runtime_config import enable_op_determinism as enable_op_determinism
from tpustrategy._src.devices.runtime_config import (
    enable_tensor_float_32_execution as enable_tensor_float_32_execution,
)
from tpustrategy._src.devices.runtime_config import get_device_details as get_device_details
from tpustrategy._src.devices.runtime_config import get_memory_growth as get_memory_growth
from tpustrategy._src.devices.runtime_config import get_memory_info as get_memory_info
from tpustrategy._src.devices.runtime_config import get_memory_usage as get_memory_usage
from tpustrategy._src.devices.runtime_config import get_visible_devices as get_visible_devices
from tpustrategy._src.devices.runtime_config import set_memory_growth as set_memory_growth
from tpustrategy._src.devices.runtime_config import set_visible_devices as set_visible_devices
from tpustrategy._src.devices.runtime_config import (
    tensor_float_32_execution_enabled as tensor_float_32_execution_enabled,
)
from tpustrategy._src.not_provided import not_provided as _not_provided

reset_memory_stats = _not_provided("tf.config.experimental.reset_memory_stats")
