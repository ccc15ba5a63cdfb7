"""TPU topology and device assignment (``tf.tpu.experimental``'s ``Topology``, ``DeviceAssignment``)."""

from tpustrategy._src.devices.device_assignment import DeviceAssignment as DeviceAssignment
from tpustrategy._src.devices.device_assignment import DeviceOrderMode as DeviceOrderMode
from tpustrategy._src.devices.topology import Topology as Topology
from tpustrategy._src.devices.tpu_system import XLAOptions as XLAOptions
from tpustrategy._src.outside_compilation import outside_compilation as outside_compilation
from tpustrategy.tpu import experimental as experimental
