"""Whether a map function can be sent to a worker process, and its pickle (`pickle_task`).

A function goes to a worker when it pickles (by reference, or by value with cloudpickle) and
captures only values; one that captures an object with state (a lock, a file, an iterator, a
class instance) or uses JAX stays on threads, and the reason is what the caller's warning says.
"""

from __future__ import annotations

import functools
import inspect
import pickle
import types
from typing import Any

from tpustrategy._src.data.parallel.channel import AVAILABLE

# --------------------------------------------------------------------------- can a function be sent?

_JAX_ROOTS = ("jax", "jaxlib", "flax", "optax", "orbax")
_VALUE_TYPES = (type(None), bool, int, float, complex, str, bytes, range, slice, type, types.ModuleType,
                type(Ellipsis))


def _is_jax(obj: Any) -> bool:
    if isinstance(obj, types.ModuleType):
        name = obj.__name__
    else:
        name = getattr(type(obj), "__module__", "") or ""
        if isinstance(obj, (types.FunctionType, type)):
            name = getattr(obj, "__module__", "") or ""
    return name.split(".")[0] in _JAX_ROOTS


def _codes(code: types.CodeType) -> list[types.CodeType]:
    out = [code]
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out += _codes(c)
    return out


def _check_value(obj: Any, where: str, seen: set[int], depth: int = 0) -> str | None:
    """Why ``obj`` (captured by the function) cannot be copied into a worker, or None."""
    if id(obj) in seen or depth > 6:
        return None
    seen.add(id(obj))
    if _is_jax(obj):
        return f"it uses JAX ({where} is {type(obj).__module__}.{type(obj).__qualname__})"
    if isinstance(obj, _VALUE_TYPES):
        return None
    mod = type(obj).__module__ or ""
    if mod == "numpy" or mod.startswith("numpy."):
        return None
    if isinstance(obj, (tuple, list, set, frozenset)):
        for v in list(obj)[:10_000]:
            why = _check_value(v, where, seen, depth + 1)
            if why:
                return why
        return None
    if isinstance(obj, dict):
        for k, v in list(obj.items())[:10_000]:
            why = _check_value(k, where, seen, depth + 1) or _check_value(v, where, seen, depth + 1)
            if why:
                return why
        return None
    if isinstance(obj, (types.FunctionType, types.MethodType, functools.partial)):
        return _check_callable(obj, seen, depth + 1)
    if isinstance(obj, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        owner = getattr(obj, "__self__", None)
        if owner is None or isinstance(owner, types.ModuleType):
            return None
    if mod.startswith("tpustrategy._src.data"):
        return None  # feature specs, data structures: plain values
    return (f"it captures a live object ({where} is a {type(obj).__module__}.{type(obj).__qualname__}); "
            "a copy in another process would not share its state")


def _check_callable(fn: Any, seen: set[int], depth: int = 0) -> str | None:
    if isinstance(fn, functools.partial):
        for i, a in enumerate(fn.args):
            why = _check_value(a, f"partial argument {i}", seen, depth + 1)
            if why:
                return why
        for k, a in fn.keywords.items():
            why = _check_value(a, f"partial argument {k}", seen, depth + 1)
            if why:
                return why
        return _check_callable(fn.func, seen, depth + 1)
    if isinstance(fn, types.MethodType):
        why = _check_value(fn.__self__, "the bound instance", seen, depth + 1)
        return why or _check_callable(fn.__func__, seen, depth + 1)
    if isinstance(fn, types.FunctionType):
        if id(fn) in seen and depth:
            return None
        seen.add(id(fn))
        if _is_jax(fn):
            return f"it is JAX's function {fn.__module__}.{fn.__qualname__}"
        for cell, name in zip(fn.__closure__ or (), fn.__code__.co_freevars):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            why = _check_value(value, f"the captured variable {name!r}", seen, depth + 1)
            if why:
                return why
        for i, d in enumerate(fn.__defaults__ or ()):
            why = _check_value(d, f"default argument {i}", seen, depth + 1)
            if why:
                return why
        g = fn.__globals__
        for code in _codes(fn.__code__):
            for name in code.co_names:
                if name in g and _is_jax(g[name]):
                    return f"it uses JAX (the global {name!r} is {getattr(g[name], '__name__', type(g[name]).__name__)})"
        return None
    if isinstance(fn, (types.BuiltinFunctionType, type)):
        return None
    call = inspect.getattr_static(type(fn), "__call__", None)
    if isinstance(call, types.FunctionType):
        why = _check_callable(call, seen, depth + 1)
        if why:
            return why
    return _check_value(fn, "the callable object", seen, depth + 1) if not hasattr(fn, "__dict__") else next(
        (w for k, v in vars(fn).items() if (w := _check_value(v, f"its attribute {k!r}", seen, depth + 1))), None)


def pickle_task(task: Any, fn: Any) -> tuple[bytes | None, str]:
    """``task`` (a callable wrapping ``fn``) pickled for a worker, or (None, why not).

    ``fn`` must pickle (by reference, or by value with cloudpickle when it is
    installed: lambdas, nested functions, functions of ``__main__``), capture
    only values (numbers, strings, NumPy arrays, containers of them; no
    objects with state such as locks, files, iterators or class instances)
    and not use JAX.
    """
    if not AVAILABLE:
        return None, "worker processes need Linux (memfd shared memory)"
    why = _check_callable(fn, set())
    if why:
        return None, why
    try:
        import cloudpickle
    except ImportError:
        cloudpickle = None
    if cloudpickle is None and getattr(fn, "__module__", None) == "__main__":
        return None, ("it is defined in __main__, which a worker cannot import; install cloudpickle "
                      "(pip install 'tpustrategy[workers]') or define it in a module")
    try:
        payload = (cloudpickle.dumps(task, protocol=5) if cloudpickle is not None
                   else pickle.dumps(task, protocol=5))
    except Exception as e:
        hint = "" if cloudpickle is not None else " (cloudpickle, pip install 'tpustrategy[workers]', pickles lambdas and closures)"
        return None, f"it cannot be pickled: {type(e).__name__}: {e}{hint}"
    return payload, ""
