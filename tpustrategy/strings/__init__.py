"""TensorFlow's ``tf.strings`` ops on NumPy values (``tps.strings``), for ``tpsd`` map functions.

Strings are ``bytes`` (scalars) and object arrays of ``bytes`` (tensors); ``str``
is accepted and encoded as UTF-8. A result TensorFlow makes ragged is a
``RaggedRows`` (the fields of ``tpsd.RaggedBatch``). ``to_hash_bucket_fast``
and the regex ops need the ``strings`` extra (``pyfarmhash``, ``google-re2``).
"""

from tpustrategy._src.not_provided import NotProvided as _NotProvided
from tpustrategy._src.strings.basic import join as join
from tpustrategy._src.strings.basic import length as length
from tpustrategy._src.strings.basic import lower as lower
from tpustrategy._src.strings.basic import reduce_join as reduce_join
from tpustrategy._src.strings.basic import strip as strip
from tpustrategy._src.strings.basic import substr as substr
from tpustrategy._src.strings.basic import unsorted_segment_join as unsorted_segment_join
from tpustrategy._src.strings.basic import upper as upper
from tpustrategy._src.strings.format import format as format  # noqa: A004 - TensorFlow's name
from tpustrategy._src.strings.hashing import to_hash_bucket as to_hash_bucket
from tpustrategy._src.strings.hashing import to_hash_bucket_fast as to_hash_bucket_fast
from tpustrategy._src.strings.hashing import to_hash_bucket_strong as to_hash_bucket_strong
from tpustrategy._src.strings.ngrams import ngrams as ngrams
from tpustrategy._src.strings.numbers import as_string as as_string
from tpustrategy._src.strings.numbers import to_number as to_number
from tpustrategy._src.strings.ragged import RaggedRows as RaggedRows
from tpustrategy._src.strings.regex import regex_full_match as regex_full_match
from tpustrategy._src.strings.regex import regex_replace as regex_replace
from tpustrategy._src.strings.split import bytes_split as bytes_split
from tpustrategy._src.strings.split import split as split
from tpustrategy._src.strings.unicode import unicode_decode as unicode_decode
from tpustrategy._src.strings.unicode import (
    unicode_decode_with_offsets as unicode_decode_with_offsets,
)
from tpustrategy._src.strings.unicode import unicode_encode as unicode_encode
from tpustrategy._src.strings.unicode import unicode_split as unicode_split
from tpustrategy._src.strings.unicode import (
    unicode_split_with_offsets as unicode_split_with_offsets,
)
from tpustrategy._src.strings.unicode import unicode_transcode as unicode_transcode

unicode_script = _NotProvided(
    "tf.strings.unicode_script",
    "it returns ICU's UScriptCode numbers, which need ICU's script tables; neither NumPy nor Python's "
    "unicodedata carries Unicode's Script property.",
    "a table of the scripts your data uses (e.g. from the `regex` package's \\p{Script=...} classes), "
    "applied with np.vectorize.")
