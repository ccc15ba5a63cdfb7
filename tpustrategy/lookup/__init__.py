"""Lookup tables (``tf.lookup`` counterparts, ``tps.lookup``): NumPy only, for ``tpsd`` pipelines."""

from tpustrategy._src.lookup.initializers import (
    KeyValueTensorInitializer as KeyValueTensorInitializer,
)
from tpustrategy._src.lookup.initializers import TextFileIndex as TextFileIndex
from tpustrategy._src.lookup.initializers import TextFileInitializer as TextFileInitializer
from tpustrategy._src.lookup.tables import StaticHashTable as StaticHashTable
from tpustrategy._src.lookup.tables import StaticVocabularyTable as StaticVocabularyTable
