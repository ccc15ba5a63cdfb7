"""``tf.tpu.experimental`` names (``tps.tpu.experimental``)."""

from tpustrategy._src.devices.device_assignment import DeviceAssignment as DeviceAssignment
from tpustrategy._src.devices.device_assignment import DeviceOrderMode as DeviceOrderMode
from tpustrategy._src.devices.topology import Topology as Topology
