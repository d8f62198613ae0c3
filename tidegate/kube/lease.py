"""Leader election through a `coordination.k8s.io/v1` Lease, as kube-scheduler's and vc-scheduler's
`--leader-elect`: several replicas may run, only the lease's holder schedules.

The holder renews the lease every `renew_seconds`. A candidate takes it over once the record has not
changed for `duration_seconds` by its own clock (client-go's rule: it times what it observed, so the
replicas' clocks need not agree). A holder that cannot renew within the duration must stop scheduling.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tidegate.kube.failures import describe

NOT_FOUND, CONFLICT = 404, 409


class Lease:
    """One candidate for one lease."""

    def __init__(
        self,
        api: client.CoordinationV1Api,
        namespace: str,
        name: str,
        identity: str,
        duration_seconds: float = 15.0,
        renew_seconds: float = 2.0,
    ) -> None:
        if not duration_seconds > renew_seconds > 0:
            raise ValueError("the lease duration must be longer than the renew period, which must be positive")
        self.api, self.namespace, self.name, self.identity = api, namespace, name, identity
        self.duration, self.renew = duration_seconds, renew_seconds
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._renewed_at = -float("inf")  # when this candidate last held the lease, by its own clock
        self.holding = False
        #: Why the last look at the lease failed (the API server away, a refusal), or "".
        self.error = ""

    def hold(self) -> bool:
        """Whether this candidate holds the lease now: acquired or renewed when due (at most every renew period).
        A look that fails (the API server away) holds nothing new, and says why in `error`."""
        now = time.monotonic()
        if self.holding and now - self._renewed_at < self.renew:
            return True
        try:
            held, self.error = self._try(now), ""
        except Exception as exc:  # the API server away, or refusing: tried again at the next look
            held, self.error = False, describe(exc)
        if held:
            self._renewed_at = now
        elif self.holding and now - self._renewed_at < self.duration:
            return True  # a failed renewal: still ours until the duration runs out
        self.holding = held
        return held

    def _try(self, now: float) -> bool:
        stamp = datetime.datetime.now(datetime.UTC)
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as exc:
            if exc.status != NOT_FOUND:
                raise
            return self._write(None, stamp, transitions=0)
        spec = lease.spec or client.V1LeaseSpec()
        record = (spec.holder_identity, spec.renew_time, spec.lease_transitions)
        if record != self._observed:
            self._observed, self._observed_at = record, now
        mine = spec.holder_identity == self.identity
        if not mine and spec.holder_identity and now - self._observed_at < self.duration:
            return False  # held by another, renewed within the duration
        transitions = (spec.lease_transitions or 0) + (0 if mine else 1)
        return self._write(lease, stamp, transitions, acquired=None if not mine else spec.acquire_time)

    def _write(
        self, lease: client.V1Lease | None, stamp: datetime.datetime, transitions: int, acquired: Any = None
    ) -> bool:
        spec = client.V1LeaseSpec(
            holder_identity=self.identity,
            lease_duration_seconds=max(int(self.duration), 1),
            acquire_time=acquired or stamp,
            renew_time=stamp,
            lease_transitions=transitions,
        )
        try:
            if lease is None:
                body = client.V1Lease(metadata=client.V1ObjectMeta(name=self.name), spec=spec)
                self.api.create_namespaced_lease(self.namespace, body)
            else:  # replace at the version read: a rival's write in between makes this one fail
                body = client.V1Lease(metadata=lease.metadata, spec=spec)
                self.api.replace_namespaced_lease(self.name, self.namespace, body)
        except ApiException as exc:
            if exc.status in (CONFLICT,):
                return False
            raise
        return True

    def release(self) -> None:
        """Give the lease up (a stopping holder), so another replica need not wait out the duration."""
        if not self.holding:
            return
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
            if lease.spec is not None and lease.spec.holder_identity == self.identity:
                lease.spec.holder_identity = ""
                self.api.replace_namespaced_lease(self.name, self.namespace, lease)
        except Exception:  # the API server away, or refusing: it runs out by itself
            pass
        self.holding = False
