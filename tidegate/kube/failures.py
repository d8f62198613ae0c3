"""What went wrong talking to the API server, in one line, and how long to wait before trying again.

An API server that is away (not started yet, restarting, its address wrong) makes every call fail the
same way; `tidegate kube` then says so once per attempt and tries again after a backoff that doubles, as
client-go's reflector and leader election back off, instead of a traceback per call.
"""

from __future__ import annotations

import json

from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError, MaxRetryError, NewConnectionError, ProtocolError

#: The first wait after a failed attempt, doubling with each failure in a row up to the last.
BACKOFF_FIRST_SECONDS, BACKOFF_MAX_SECONDS = 1.0, 30.0


class Unreachable(RuntimeError):
    """The API server cannot be read now (an informer's last list or watch failed): try again later."""


def backoff(failures: int) -> float:
    """Seconds to wait after `failures` failed attempts in a row: 1, 2, 4, ... 30."""
    return min(BACKOFF_FIRST_SECONDS * 2.0 ** max(failures - 1, 0), BACKOFF_MAX_SECONDS)


def expected(exc: BaseException) -> bool:
    """Whether the failure is the API server's or the network's (not worth a traceback), not tidegate's."""
    return isinstance(exc, (ApiException, HTTPError, OSError, Unreachable))


def describe(exc: BaseException) -> str:
    """The failure on one line: the API server unreachable (and why), or what it answered."""
    if isinstance(exc, MaxRetryError):
        pool = getattr(exc, "pool", None)
        where = f" {pool.scheme}://{pool.host}:{pool.port}" if pool is not None else ""
        reason = exc.reason
        if isinstance(reason, NewConnectionError):
            why = str(reason).split("Failed to establish a new connection: ")[-1]
        else:
            why = str(reason) if reason is not None else str(exc)
        return _line(f"API server{where} unreachable: {why}")
    if isinstance(exc, ProtocolError):
        return _line(f"the connection to the API server broke: {exc}")
    if isinstance(exc, ApiException):
        said = ""
        try:
            said = str(json.loads(exc.body or "{}").get("message", ""))
        except (ValueError, AttributeError):
            said = ""
        return _line(f"the API server answered {exc.status} {exc.reason}" + (f": {said}" if said else ""))
    if isinstance(exc, Unreachable):
        return _line(str(exc))
    return _line(f"{type(exc).__name__}: {exc}")


def _line(text: str) -> str:
    return " ".join(text.split())
