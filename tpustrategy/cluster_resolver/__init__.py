"""Cluster resolvers (``tf.distribute.cluster_resolver``): who is in the job, and who am I."""

from tpustrategy._src.cluster.base import ClusterResolver as ClusterResolver
from tpustrategy._src.cluster.cluster_spec import ClusterSpec as ClusterSpec
from tpustrategy._src.cluster.simple import SimpleClusterResolver as SimpleClusterResolver
from tpustrategy._src.cluster.slurm import SlurmClusterResolver as SlurmClusterResolver
from tpustrategy._src.cluster.tf_config import TFConfigClusterResolver as TFConfigClusterResolver
from tpustrategy._src.cluster.tpu import TPUClusterResolver as TPUClusterResolver
from tpustrategy._src.cluster.union import UnionResolver as UnionResolver
