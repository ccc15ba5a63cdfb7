"""The JAX releases tpustrategy supports: the one spelling every "use a supported JAX" fix names.

``pyproject.toml`` pins the same range (``tests/jax_shims/test_supported.py``
compares them); CI tests both ends of it. ``runtime_service.py`` spells it out
itself because the coordination helper loads that file by path, without this
package.
"""

from __future__ import annotations

JAX_RANGE = "jax>=0.10.2,<0.13"

FIX = f"Fix: install a JAX release tpustrategy supports: pip install '{JAX_RANGE}'."
