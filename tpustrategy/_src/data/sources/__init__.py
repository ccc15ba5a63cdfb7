"""Sources: readers and record formats, writers, in-memory and generated datasets, save / load / snapshot.

Imports ``core``, ``parallel`` and ``transformations`` (the file readers interleave their files).
"""
