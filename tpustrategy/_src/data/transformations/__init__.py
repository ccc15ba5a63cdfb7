"""One module per transformation of a dataset (imports ``core`` and ``parallel``)."""
