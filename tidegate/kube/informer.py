"""A kind's objects kept current by one list and then a watch, as client-go's reflector keeps an informer's
store: reading them costs no API call, so a cycle on a large cluster does not pay a full listing.

A watch that ends (its timeout) is resumed from the last resourceVersion seen; one the API server no longer
has (410 Gone) starts over from a list, as does any other error, after a backoff that doubles with each
failure in a row (1 s up to 30 s, as client-go's reflector backs off). While the last attempt failed
(`error`), the objects may be stale: `ready` then tries again at once and, failing, raises `Unreachable`,
so a scheduling cycle does not run on them. Objects are kept as the JSON documents the API server sent,
with their apiVersion and kind. `stop` shuts the open watch's socket, so the thread ends at once rather
than at the watch's timeout: a process that stops must not leave it blocked in a read while the
interpreter shuts down.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from tidegate.kube.failures import Unreachable, backoff, describe

_log = logging.getLogger(__name__)
#: Seconds a watch request stays open before it is resumed (the API server ends it by then anyway).
WATCH_SECONDS = 60
GONE = 410


class _Gone(Exception):
    """The watch's resourceVersion is too old: list again."""


class Informer:
    """One kind's objects (`list_call` lists them all: a namespaced kind across namespaces)."""

    def __init__(
        self, list_call: Callable[..., Any], api_version: str, kind: str, request_timeout: float = 0.0
    ) -> None:
        """`request_timeout`: the seconds a list may wait for each read (the client's timeout, which the list
        takes); a watch may wait WATCH_SECONDS longer, its own timeoutSeconds (0: no limit)."""
        self.list_call = list_call
        self.watch_timeout = (request_timeout, WATCH_SECONDS + request_timeout) if request_timeout > 0 else None
        self.api_version, self.kind = api_version, kind
        self._objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.synced = threading.Event()
        self._stop = threading.Event()
        #: Set to end a backoff's wait early (`ready` asks for an attempt now).
        self._wake = threading.Event()
        #: Notified after every list attempt and failure (`attempts` counts them).
        self._attempted = threading.Condition()
        self.attempts = 0
        #: Why the last attempt (a list, or the watch after it) failed; "" once a list succeeds again.
        self.error = ""
        #: Attempts failed in a row (the backoff's exponent).
        self.failures = 0
        self._response: Any = None  # the open watch request (a urllib3 response)
        self._thread = threading.Thread(target=self._run, name=f"tidegate-informer-{kind}", daemon=True)
        #: Lists done (the first, then one after each 410 or error).
        self.lists = 0
        #: Bumped by every list and every event applied: unchanged, the objects are the same.
        self.changes = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """End the thread: the open watch's socket is shut, which wakes its read."""
        self._stop.set()
        self._wake.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):  # already closed, or released to the pool
                response.shutdown()

    def join(self, timeout: float) -> bool:
        """Wait for the stopped thread to end; whether it has."""
        if self._thread.ident is not None:
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def items(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._objects.values())

    def ready(self, timeout: float) -> None:
        """Wait (up to `timeout` seconds) for the objects to be listed; while the last attempt failed, try
        again now rather than at the backoff's end. Raises Unreachable when that fails too, TimeoutError when
        nothing is known by then."""
        with self._attempted:
            if self.error:
                seen = self.attempts
                self._wake.set()
                self._attempted.wait_for(lambda: self.attempts > seen or self._stop.is_set(), timeout)
            else:
                self._attempted.wait_for(lambda: self.synced.is_set() or bool(self.error), timeout)
            if self.error:
                raise Unreachable(f"watching {self.kind}s: {self.error}")
        if not self.synced.is_set():
            raise TimeoutError(f"{self.kind}s not listed within {timeout:g} s")

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                version = self._list()
                while not self._stop.is_set():
                    version = self._follow(version)
            except _Gone:
                _log.info("%s watch expired: listing again", self.kind)
            except Exception as exc:
                if self._stop.is_set():
                    return  # stopped while a request was open
                wait = self._failed(exc)
                self._wake.wait(wait)
                self._wake.clear()

    def _failed(self, exc: Exception) -> float:
        """Record a failed attempt; the seconds to wait before the next. Logged on one line at info level (the
        failed cycle says it: `tidegate kube`), its traceback at debug level."""
        with self._attempted:
            self.failures += 1
            self.error = describe(exc)
            self.attempts += 1
            self._attempted.notify_all()
        wait = backoff(self.failures)
        _log.info("%s informer: %s; listing again in %g s", self.kind, self.error, wait)
        _log.debug("%s informer failed", self.kind, exc_info=True)
        return wait

    def _list(self) -> str:
        data = json.loads(self.list_call(_preload_content=False).data)
        objects = {_key(doc): doc for doc in documents(data, self.api_version, self.kind)}
        with self._lock:
            self._objects = objects
            self.changes += 1
        self.lists += 1
        self.synced.set()
        with self._attempted:
            if self.error:
                _log.info("%s informer: listed again", self.kind)
            self.error, self.failures = "", 0
            self.attempts += 1
            self._attempted.notify_all()
        version: str = data["metadata"]["resourceVersion"]
        return version

    def _follow(self, version: str) -> str:
        """Apply the watch's events from `version` until the request ends; the last version seen."""
        try:
            response = self.list_call(
                watch=True,
                resource_version=version,
                timeout_seconds=WATCH_SECONDS,
                allow_watch_bookmarks=True,
                _preload_content=False,
                _request_timeout=self.watch_timeout,
            )
        except ApiException as exc:
            if exc.status == GONE:
                raise _Gone from exc
            raise
        self._response = response
        try:
            if self._stop.is_set():  # stopped while the request was made: `stop` did not see it
                return version
            for line in iter_resp_lines(response):  # type: ignore[no-untyped-call]
                if not line:
                    continue
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == GONE:
                        raise _Gone
                    raise RuntimeError(f"watch error: {obj.get('message')}")
                version = obj.get("metadata", {}).get("resourceVersion", version)
                if kind == "BOOKMARK":
                    continue
                doc = {**obj, "apiVersion": self.api_version, "kind": self.kind}
                with self._lock:
                    self.changes += 1
                    if kind == "DELETED":
                        self._objects.pop(_key(doc), None)
                    else:  # ADDED, MODIFIED
                        self._objects[_key(doc)] = doc
        finally:
            self._response = None
            response.release_conn()
        return version


def documents(listing: dict[str, Any], api_version: str, kind: str) -> list[dict[str, Any]]:
    """A list answer's items as documents (list items carry no apiVersion or kind of their own)."""
    return [{**item, "apiVersion": api_version, "kind": kind} for item in listing.get("items") or ()]


def _key(doc: dict[str, Any]) -> tuple[str, str]:
    meta = doc.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))
