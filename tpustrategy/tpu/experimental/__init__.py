"""``tf.tpu.experimental`` names (``tps.tpu.experimental``)."""

from tpustrategy._src.cluster.connect import initialize_tpu_system as initialize_tpu_system
from tpustrategy._src.cluster.connect import shutdown_tpu_system as shutdown_tpu_system
from tpustrategy._src.devices.device_assignment import DeviceAssignment as DeviceAssignment
from tpustrategy._src.devices.device_assignment import DeviceOrderMode as DeviceOrderMode
from tpustrategy._src.devices.topology import Topology as Topology
from tpustrategy._src.devices.tpu_system import HardwareFeature as HardwareFeature
from tpustrategy._src.devices.tpu_system import TPUSystemMetadata as TPUSystemMetadata
from tpustrategy._src.not_provided import not_provided as _not_provided

embedding = _not_provided("tf.tpu.experimental.embedding")
