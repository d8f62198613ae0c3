"""A kind's objects kept current by one list and then a watch, as client-go's reflector keeps an informer's
store: reading them costs no API call, so a cycle on a large cluster does not pay a full listing.

A watch that ends (its timeout) is resumed from the last resourceVersion seen; one the API server no longer
has (410 Gone) starts over from a list, as does any other error after a short pause. Objects are kept as
the JSON documents the API server sent, with their apiVersion and kind. `stop` shuts the open watch's
socket, so the thread ends at once rather than at the watch's timeout: a process that stops must not
leave it blocked in a read while the interpreter shuts down.
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

_log = logging.getLogger(__name__)
#: Seconds a watch request stays open before it is resumed (the API server ends it by then anyway).
WATCH_SECONDS = 60
#: Seconds to wait after an error before listing again.
RETRY_SECONDS = 1.0
GONE = 410


class _Gone(Exception):
    """The watch's resourceVersion is too old: list again."""


class Informer:
    """One kind's objects (`list_call` lists them all: a namespaced kind across namespaces)."""

    def __init__(self, list_call: Callable[..., Any], api_version: str, kind: str) -> None:
        self.list_call = list_call
        self.api_version, self.kind = api_version, kind
        self._objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.synced = threading.Event()
        self._stop = threading.Event()
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

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                version = self._list()
                while not self._stop.is_set():
                    version = self._follow(version)
            except _Gone:
                _log.info("%s watch expired: listing again", self.kind)
            except Exception:
                if self._stop.is_set():
                    return  # stopped while a request was open
                _log.exception("%s informer failed: listing again in %g s", self.kind, RETRY_SECONDS)
                self._stop.wait(RETRY_SECONDS)

    def _list(self) -> str:
        data = json.loads(self.list_call(_preload_content=False).data)
        objects = {_key(doc): doc for doc in documents(data, self.api_version, self.kind)}
        with self._lock:
            self._objects = objects
            self.changes += 1
        self.lists += 1
        self.synced.set()
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
