"""Cloud burst: which waiting jobs move to the burst queue, and how their pods change when they do.

The rule (`Burst.moves`): a waiting job that is not pinned to the IDC, has its pods, has none running, and is
not in the burst queue already moves there once it has waited `after_seconds`, or at once when a queue's
capability stops it (its scheduler refusal's code is `AT_CAPABILITY`: the local cap is reached), provided
the burst queue takes work from its namespace. Its pods then tolerate the cloud taint and prefer IDC nodes,
so they land on a cloud node only when no IDC node has room. `Overflow` applies the rule after every
scheduling cycle of every host, and sends burst jobs home when every cloud's link is down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tidegate.fleet.links import Links
from tidegate.fleet.pool import CLOUD_TOLERATION, PREFER_IDC
from tidegate.fleet.port import BurstHost, EventKind, WaitingJob
from tidegate.model.objects import Pod
from tidegate.scheduler.refusal import Refusal, RefusalCode


@dataclass(frozen=True, slots=True)
class Burst:
    """Where jobs overflow to, and after how long a wait (a Scenario's `spec.burst`)."""

    queue: str
    after_seconds: float = 600.0

    def may_move(self, job: WaitingJob) -> bool:
        """Whether the job may ever move: not pinned, not there already, its pods made (those of a job with
        no pod yet would come without the cloud toleration), none of them running."""
        return not job.pinned and job.queue != self.queue and job.has_pods and not job.part_running

    def moves(self, job: WaitingJob, waited: float, code: RefusalCode) -> bool:
        """Whether a job that may move does now, having waited `waited` and refused with `code`."""
        return waited >= self.after_seconds or code is RefusalCode.AT_CAPABILITY


class Overflow:
    """Cloud burst applied to a host's waiting jobs."""

    def __init__(self, burst: Burst, host: BurstHost, links: Links) -> None:
        """Burst is off while `links` says every cloud's link is down."""
        self.burst = burst
        self.host = host
        self.links = links
        links.on_all_cut = self.send_home

    def after_cycle(self, now: float) -> float:
        """Move the waiting jobs the rule says to the burst queue; returns when the next job that may move will
        have waited long enough (inf: none).

        This runs after every cycle over every waiting job outside the burst queue, so `Burst.may_move` and
        `Burst.moves` are inlined here (same tests, same order; tests/test_burst_rule.py holds the two to
        each other): a job's reason is asked only when its wait alone does not move it, and its code read
        without a call. Each WaitingJob is unpacked once rather than read field by field."""
        if self.links.blocks_burst:
            return math.inf
        host = self.host
        queue, after = self.burst.queue, self.burst.after_seconds
        reason = host.reason
        soonest = math.inf
        moved = False
        for key, in_queue, home, since, namespace, pinned, has_pods, part_running in list(host.waiting(outside=queue)):
            if pinned or in_queue == queue or not has_pods or part_running:
                continue  # not Burst.may_move
            if now - since < after:
                why = reason(key)
                if not (isinstance(why, Refusal) and why.code is RefusalCode.AT_CAPABILITY):
                    due = since + after  # not Burst.moves: it may when it has waited `after`
                    if due < soonest:
                        soonest = due
                    continue
            if not host.admits(queue, namespace):
                continue  # no burst queue (yet), or one that does not take this namespace's work
            host.move(key, queue)
            host.record(f"overflowed from {home} to {queue}", EventKind.OVERFLOW, key)
            moved = True
        if moved:
            host.want_cycle()
        return soonest

    def send_home(self) -> None:
        """Every cloud's link is down: jobs waiting in the burst queue go back to the queue they were submitted
        to (one submitted to the burst queue waits there; one with part of its gang running keeps its queue)."""
        host, queue = self.host, self.burst.queue
        for job in list(host.waiting()):
            if job.queue != queue:
                continue
            if job.home == queue:
                text = f"waits in {queue} (link cut, no home queue to fall back to)"
                host.record(text, EventKind.LINK_AFFECTED, job.key)
                continue
            if job.part_running:
                continue
            host.move(job.key, job.home)
            host.record(f"moved back from {queue} to {job.home} (link cut)", EventKind.LINK_AFFECTED, job.key)

    def queue_for(self, key: str, queue: str, home: str) -> str:
        """The queue a job (re)submitted to `queue` waits in: its home while burst is off."""
        if queue == self.burst.queue and home != queue and self.links.blocks_burst:
            self.host.record(f"back to {home} (link cut)", EventKind.LINK, key)
            return home
        return queue


def burstable(pod: Pod) -> Pod:
    """The pod as the burst queue runs it: tolerating the cloud taint, preferring IDC nodes (unless it says
    where it prefers to run)."""
    tolerations = pod.tolerations if CLOUD_TOLERATION in pod.tolerations else (*pod.tolerations, CLOUD_TOLERATION)
    affinity = pod.affinity
    if affinity is None or not affinity.preferred:
        affinity = PREFER_IDC if affinity is None else replace(affinity, preferred=PREFER_IDC.preferred)
    return replace(pod, tolerations=tolerations, affinity=affinity)
