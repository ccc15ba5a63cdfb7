"""Lookup tables (``tf.lookup`` counterparts, ``tps.lookup``): NumPy only, for ``tpsd`` pipelines."""

from tpustrategy._src.lookup.initializers import (
    KeyValueTensorInitializer as KeyValueTensorInitializer,
)
from tpustrategy._src.lookup.initializers import TextFileIndex as TextFileIndex
from tpustrategy._src.lookup.initializers import TextFileInitializer as TextFileInitializer
from tpustrategy._src.lookup.tables import StaticHashTable as StaticHashTable
from tpustrategy._src.lookup.tables import StaticVocabularyTable as StaticVocabularyTable
from tpustrategy._src.not_provided import not_provided as _not_provided

experimental = _not_provided("tf.lookup.experimental")
