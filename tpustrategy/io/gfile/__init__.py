"""``tf.io.gfile`` for local files (``tps.io.gfile``); other URL schemes raise UnimplementedError."""

from tpustrategy._src.io.gfile import GFile as GFile
from tpustrategy._src.io.gfile import copy as copy
from tpustrategy._src.io.gfile import exists as exists
from tpustrategy._src.io.gfile import get_registered_schemes as get_registered_schemes
from tpustrategy._src.io.gfile import glob as glob
from tpustrategy._src.io.gfile import isdir as isdir
from tpustrategy._src.io.gfile import join as join
from tpustrategy._src.io.gfile import listdir as listdir
from tpustrategy._src.io.gfile import makedirs as makedirs
from tpustrategy._src.io.gfile import mkdir as mkdir
from tpustrategy._src.io.gfile import remove as remove
from tpustrategy._src.io.gfile import rename as rename
from tpustrategy._src.io.gfile import rmtree as rmtree
from tpustrategy._src.io.gfile import stat as stat
from tpustrategy._src.io.gfile import walk as walk
