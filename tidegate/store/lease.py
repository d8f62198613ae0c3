"""One server at a time on a store: a lease kept in the store itself.

Two `tidegate serve` processes on one database would each schedule from what they loaded and overwrite
each other's writes, losing what the other had accepted. So a server holds the store's lease before it
loads anything, as kube-scheduler holds its Lease (`tidegate.kube.lease`, the same rules):

- the holder renews the lease every `renew_seconds`; each of its writes renews it too;
- a candidate takes the lease over once its record has not changed for `duration_seconds` by the
  candidate's own clock (client-go's rule: the servers' clocks need not agree), or at once when the
  holder released it on a clean stop;
- every write of a holder first checks, in the same transaction, that it still holds the lease
  (`Store.holder`), so a holder that stalled past the duration and lost the lease writes nothing more.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from tidegate.store.records import StoreError

if TYPE_CHECKING:
    from tidegate.store.sql import LeaseRecord, Store

DURATION_SECONDS = 15.0
RENEW_SECONDS = 2.0


def identity() -> str:
    """This process, as a lease names its holder: host, pid and a random part (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class StoreLease:
    """One server's candidacy for a store's lease."""

    def __init__(
        self,
        store: Store,
        holder: str,
        duration_seconds: float = DURATION_SECONDS,
        renew_seconds: float = RENEW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not duration_seconds > renew_seconds > 0:
            raise ValueError("the lease duration must be longer than the renew period, which must be positive")
        self.store, self.identity = store, holder
        self.duration, self.renew = duration_seconds, renew_seconds
        self._clock = clock
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._renewed_at = -float("inf")
        self.holding = False
        #: Who held the lease when this candidate last looked ("" for nobody).
        self.seen_holder = ""
        #: How often this candidate saw another holder's record change (that holder is alive).
        self.renewals_seen = 0
        #: Why the last look at the lease failed (the store cannot be opened or reached), or "".
        self.error = ""

    def hold(self) -> bool:
        """Whether this server holds the lease now: taken or renewed when due (at most every renew period).
        Once held, it is lost when another server has taken it, or when renewing failed for the duration;
        the store then refuses this server's writes."""
        now = self._clock()
        if self.holding and now - self._renewed_at < self.renew:
            return True
        try:
            held = self._try(now)
            self.error = ""
        except StoreError as exc:
            held, self.error = False, str(exc)
            # the database is unreachable: a holder keeps the lease until the duration runs out
            if self.holding and now - self._renewed_at < self.duration:
                return True
        if held:
            self._renewed_at = now
            self.store.holder = self.identity
        self.holding = held
        return held

    def _try(self, now: float) -> bool:
        record = self.store.lease_record()
        if record is None:
            return self.store.claim_lease(self.identity, None)
        holder = self.seen_holder = record[0]
        if record != self._observed:
            if self._observed is not None and holder != self.identity:
                self.renewals_seen += 1
            self._observed, self._observed_at = record, now
        if holder == self.identity:
            return self.store.renew_lease(self.identity)
        if holder and now - self._observed_at < self.duration:
            return False  # another server holds it and renewed within the duration
        return self.store.claim_lease(self.identity, record)

    def release(self) -> None:
        """Give the lease up on a clean stop, so the next server takes it at once."""
        if self.holding:
            with contextlib.suppress(StoreError):  # else it runs out by itself
                self.store.release_lease(self.identity)
        self.holding = False
