"""Validation of the values that start a multi-process job, with house-style messages.

Every message names ``tps.initialize``, the argument, what was received and
from where (an argument, a resolver or an environment variable), the rule, and
a fix.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

_API = "tps.initialize"


def _from(source: str) -> str:
    return f" (from {source})" if source and source != "argument" else ""


def check_process_id(value: Any, source: str = "argument") -> int:
    """Returns ``value`` if it is a nonnegative int, else raises ``TypeError``/``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{_API}: process_id must be a nonnegative int. Got process_id={value!r} of type "
            f"{type(value).__name__}{_from(source)}.\n"
            "Fix: pass process_id=0 on the first process, 1 on the second, ... "
            "(or set TPS_PROCESS_ID)."
        )
    if value < 0:
        raise ValueError(
            f"{_API}: process_id must be a nonnegative int. Got process_id={value}{_from(source)}.\n"
            "Fix: number the processes 0, 1, ..., num_processes - 1."
        )
    return value


def check_num_processes(value: Any, source: str = "argument") -> int:
    """Returns ``value`` if it is a positive int, else raises ``TypeError``/``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{_API}: num_processes must be a positive int. Got num_processes={value!r} of "
            f"type {type(value).__name__}{_from(source)}.\n"
            "Fix: pass the number of processes of the job, the same on every process "
            "(or set TPS_NUM_PROCESSES)."
        )
    if value < 1:
        raise ValueError(
            f"{_API}: num_processes must be a positive int. Got num_processes={value}"
            f"{_from(source)}.\nFix: pass the number of processes of the job (>= 1)."
        )
    return value


def check_process_in_range(process_id: int, num_processes: int, sources: tuple[str, str]) -> None:
    """Raises ``ValueError`` unless ``0 <= process_id < num_processes``."""
    if process_id >= num_processes:
        raise ValueError(
            f"{_API}: process_id must be smaller than num_processes. Got process_id="
            f"{process_id}{_from(sources[0])} and num_processes={num_processes}"
            f"{_from(sources[1])}.\nFix: number the processes 0 .. {num_processes - 1}, or "
            "raise num_processes to the size of the job."
        )


def check_address(value: Any, source: str = "argument",
                  name: str = "coordinator_address") -> str:
    """Returns ``value`` if it is ``"host:port"`` with a port in 1..65535."""
    if not isinstance(value, str):
        raise TypeError(
            f"{_API}: {name} must be a 'host:port' string. Got {name}={value!r} of type "
            f"{type(value).__name__}{_from(source)}.\n"
            f"Fix: pass e.g. {name}='10.0.0.1:1234' (process 0's address)."
        )
    text = value.strip()
    if "://" in text:
        text = text.split("://", 1)[1]
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f"{_API}: {name} must be 'host:port' with a port in 1..65535. Got {name}="
            f"{value!r}{_from(source)}.\n"
            f"Fix: pass e.g. {name}='10.0.0.1:1234' (process 0's address), or "
            f"'127.0.0.1:1234' for processes on this machine."
        )
    return text


def check_timeout(value: Any, name: str) -> int:
    """Returns ``value`` if it is a positive whole number of seconds."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"{_API}: {name} must be a positive int (seconds). Got {name}={value!r}.\n"
            f"Fix: pass e.g. {name}=60."
        )
    return value


def check_local_device_ids(value: Any) -> list[int] | None:
    """Returns ``value`` as a list of nonnegative ints (or None)."""
    if value is None:
        return None
    ids: Sequence[Any] = [value] if isinstance(value, int) else value
    if (isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence)
            or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids)):
        raise TypeError(
            f"{_API}: local_device_ids must be an int or a sequence of nonnegative ints. "
            f"Got local_device_ids={value!r}.\nFix: pass e.g. local_device_ids=[0, 1]."
        )
    return list(ids)


def parse_env_int(name: str, raw: str) -> int:
    """Parses an integer environment variable, naming it in the error."""
    try:
        return int(raw.strip())
    except ValueError:
        raise ValueError(
            f"{_API}: environment variable {name}={raw!r} is not an int.\n"
            f"Fix: set {name} to a whole number, or unset it and pass the value as an argument."
        ) from None


def is_loopback(address: str) -> bool:
    """Returns whether ``host:port`` names this machine's loopback interface."""
    host = address.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
