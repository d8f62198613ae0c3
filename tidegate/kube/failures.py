"""What went wrong talking to the API server, in one line, and how long to wait before trying again.

An API server that is away (not started yet, restarting, its address wrong, or accepting connections but
never answering: every request times out, `tidegate.kube.api.timed`) makes every call fail the same way;
`tidegate kube` then says so once per attempt and tries again after a backoff that doubles, as client-go's
reflector and leader election back off, instead of a traceback per call.
"""

from __future__ import annotations

import json
import re
from types import TracebackType
from typing import Self

from kubernetes.client.exceptions import ApiException
from urllib3.connectionpool import ConnectionPool
from urllib3.exceptions import HTTPError, MaxRetryError, NewConnectionError, ProtocolError
from urllib3.exceptions import TimeoutError as RequestTimeout
from urllib3.response import BaseHTTPResponse
from urllib3.util.retry import Retry

#: The first wait after a failed attempt, doubling with each failure in a row up to the last.
BACKOFF_FIRST_SECONDS, BACKOFF_MAX_SECONDS = 1.0, 30.0


class Unreachable(RuntimeError):
    """The API server cannot be read now (an informer's last list or watch failed): try again later."""


def backoff(failures: int) -> float:
    """Seconds to wait after `failures` failed attempts in a row: 1, 2, 4, ... 30."""
    return min(BACKOFF_FIRST_SECONDS * 2.0 ** max(failures - 1, 0), BACKOFF_MAX_SECONDS)


class NoRetryOfTimeouts(Retry):
    """urllib3's retries, but never of a request that timed out (connecting, or waiting for the answer): one
    that accepts connections and never answers would cost the timeout again at each retry. The caller's
    backoff tries again instead."""

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: BaseHTTPResponse | None = None,
        error: Exception | None = None,
        _pool: ConnectionPool | None = None,
        _stacktrace: TracebackType | None = None,
    ) -> Self:
        if isinstance(error, RequestTimeout):
            raise MaxRetryError(_pool, url, error) from error  # type: ignore[arg-type]  # as Retry raises it
        return super().increment(method, url, response, error, _pool, _stacktrace)


def expected(exc: BaseException) -> bool:
    """Whether the failure is the API server's or the network's (not worth a traceback), not tidegate's."""
    return isinstance(exc, (ApiException, HTTPError, OSError, Unreachable))


def describe(exc: BaseException) -> str:
    """The failure on one line: the API server unreachable (and why), or what it answered."""
    if isinstance(exc, MaxRetryError):
        pool = getattr(exc, "pool", None)
        where = f" {pool.scheme}://{pool.host}:{pool.port}" if pool is not None else ""
        reason = exc.reason
        # A refused connection or an unknown host first: urllib3 makes NewConnectionError a ConnectTimeoutError.
        if isinstance(reason, NewConnectionError):
            why = str(reason).split("Failed to establish a new connection: ")[-1]
        elif isinstance(reason, RequestTimeout):
            why = _timed_out(reason)
        else:
            why = str(reason) if reason is not None else str(exc)
        return _line(f"API server{where} unreachable: {why}")
    if isinstance(exc, NewConnectionError):
        return _line(f"API server unreachable: {str(exc).split('Failed to establish a new connection: ')[-1]}")
    if isinstance(exc, RequestTimeout):  # a watch's answer that stopped coming
        return _line(f"the API server stopped answering: {_timed_out(exc)}")
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


_TIMEOUT = re.compile(r"\((read|connect) timeout=([0-9.e+-]+)\)")


def _timed_out(exc: RequestTimeout) -> str:
    """A timeout said plainly: `no answer within 30 s (--request-timeout)`."""
    found = _TIMEOUT.search(str(exc))
    if found is None:
        return f"no answer in time ({exc})"
    doing = "connecting" if found.group(1) == "connect" else "waiting for its answer"
    return f"no answer within {float(found.group(2)):g} s {doing} (--request-timeout)"


def _line(text: str) -> str:
    return " ".join(text.split())
