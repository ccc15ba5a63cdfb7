"""The dataset node, the iterator protocol, element structure and specs, options, seeds and state codecs.

Nothing here imports another subpackage of ``data`` at import time; the fluent methods of
`Dataset` (``dataset``, ``dataset_more``, ``dataset_sources``) import their transformation's
module inside the method (the one declared import circle).
"""
