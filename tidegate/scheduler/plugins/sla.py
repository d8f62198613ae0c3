"""sla: a job that has waited its `sla-waiting-time` is admitted and goes first (Volcano's sla plugin).

The waiting time is the PodGroup's `volcano.sh/sla-waiting-time` or `sla-waiting-time` annotation (a vcjob's
annotations are its PodGroup's), else the plugin's `sla-waiting-time` argument (every job); a job with
neither has no SLA. Both are Go durations ("1h2m3s"); a bad one is refused when the manifests are checked.

- Job order: jobs with a waiting time before jobs without, and among them the earliest deadline (creation
  plus waiting time) first, so a job past its waiting time goes before every job not yet past its own.
- Enqueue and pipelined: once `snapshot.now` is at least creation plus waiting time the plugin votes
  Permit (else it abstains): the job is admitted (for preempt and reclaim: kept pipelined) whatever the
  plugins of later tiers say, while refusals from its own tier and earlier ones still stand, as Volcano's
  session combines Permit, Abstain and Reject (`ExtensionPoints.job_enqueue_permit`).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from tidegate.model.errors import FieldError
from tidegate.model.manifests import as_waiting_time
from tidegate.scheduler.framework import Plugin, PluginArgumentError
from tidegate.scheduler.info import JobInfo, TaskStatus
from tidegate.scheduler.session import Session

WAITING_TIME_ARGUMENT = "sla-waiting-time"


class SlaPlugin(Plugin):
    name: ClassVar[str] = "sla"
    reopens_in_place = True  # its key reads the job's group; its permit reads the job and `ssn.now`

    def check_arguments(self) -> None:
        self._global_waiting_time()

    def _global_waiting_time(self) -> float | None:
        """The `sla-waiting-time` argument in seconds, None when it is not given."""
        if WAITING_TIME_ARGUMENT not in self.arguments:
            return None
        try:
            return as_waiting_time(self.arguments[WAITING_TIME_ARGUMENT], WAITING_TIME_ARGUMENT)
        except FieldError as exc:
            raise PluginArgumentError(self.name, WAITING_TIME_ARGUMENT, exc.message) from None

    def on_session_open(self, ssn: Session) -> None:
        every_job = self._global_waiting_time()

        def waiting_time(job: JobInfo) -> float | None:
            wait = job.group.waiting_time
            return every_job if wait is None else wait

        def job_order(job: Any) -> float:
            """The job's deadline (creation plus waiting time), inf for a job without a waiting time."""
            wait = waiting_time(job)
            return math.inf if wait is None else job.group.created + wait

        def permit(job: JobInfo) -> bool:
            """Volcano: time.Since(creation) below the waiting time abstains, anything else permits."""
            wait = waiting_time(job)
            return wait is not None and ssn.now - job.group.created >= wait

        def wake_at() -> float:
            """The next deadline of a job with pods still waiting (a cycle then may admit it)."""
            now, soonest = ssn.now, math.inf
            for queue in ssn.queues.values():
                for job in queue.unsettled():
                    if job.counts[TaskStatus.PENDING]:
                        deadline = job_order(job)
                        if now < deadline < soonest:
                            soonest = deadline
            return soonest

        ssn.ext.job_order.append(job_order)
        ssn.ext.job_enqueue_permit.append(permit)
        ssn.ext.job_pipeline_permit.append(permit)
        ssn.ext.wake_at.append(wake_at)
