"""Who changed what through the live API: one JSON line per call that changes state, as kube-apiserver's
audit log at its Metadata level (who, which verb on which path, when, and how it was answered; no bodies).

    {"time": "2026-12-03T19:20:00.123456Z", "user": "ops", "verb": "PATCH", "path": "/queues/dev", "code": 200}

Reads (GET, HEAD) are not logged. The user is the token's holder ("" when the API has no tokens, or the
call carried no valid token: it was refused, 401).
"""

from __future__ import annotations

import datetime
import json
import sys
import threading
from pathlib import Path
from typing import IO, Any

#: `--audit-log -`: the lines go to standard error.
STDERR = "-"


class AuditLog:
    """Appends audit records to a file (or standard error), a whole line at a time."""

    def __init__(self, where: str) -> None:
        """Raises ValueError naming the file when it cannot be opened for appending."""
        self.where = where
        if where == STDERR:
            self._out: IO[str] = sys.stderr
        else:
            try:
                self._out = Path(where).open("a", encoding="utf-8")  # noqa: SIM115 (closed by close())
            except OSError as exc:
                raise ValueError(f"--audit-log {where}: {exc.strerror or exc}") from exc
        self._lock = threading.Lock()

    def record(self, user: str, verb: str, path: str, code: int) -> None:
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        entry: dict[str, Any] = {"time": stamp, "user": user, "verb": verb, "path": path, "code": code}
        line = json.dumps(entry) + "\n"
        with self._lock:
            self._out.write(line)
            self._out.flush()

    def close(self) -> None:
        if self._out is not sys.stderr:
            self._out.close()
