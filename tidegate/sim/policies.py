"""What a simulated job does when its pods are evicted: Volcano's vcjob lifecycle policies and maxRetry.

A Workload names a vcjob (`jobTemplate`) in the simulation folder; every job of the workload follows
its policies as Volcano's job controller would (pkg/controllers/job, `applyPolicies` and the
running/restarting states):

- The event is looked up in the task's policies first (a simulated job is one task of identical pods:
  the template's first task), then in the job's; the first policy naming the event, or `*`, decides.
- RestartJob, RestartTask and RestartPod count a retry (`status.retryCount++`); when the count reaches
  `maxRetry` the job fails for good (the restarting state's `retryCount >= maxRetry`): with the
  default of 3, the third restart fails the job. A simulated job's pods are one gang that trains
  together, so all three restart the whole gang from its last checkpoint.
- AbortJob and TerminateJob end the job failed; CompleteJob ends it completed.
- No matching policy: Volcano only syncs the job, recreating the missing pods without counting a retry;
  the gang restarts from its last checkpoint and is never failed. A Workload without a template
  behaves so (as the simulator always did).

Spot interruptions and reclaim/preempt evictions both delete pods, which the job controller sees as
`PodEvicted`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidegate.model.objects import DEFAULT_MAX_RETRY, Job, JobAction, JobEvent, LifecyclePolicy

#: Kubernetes' default terminationGracePeriodSeconds.
DEFAULT_GRACE_SECONDS = 30.0
RESTARTS = (JobAction.RESTART_JOB, JobAction.RESTART_TASK, JobAction.RESTART_POD)
FAILS = (JobAction.ABORT_JOB, JobAction.TERMINATE_JOB)


@dataclass(frozen=True, slots=True)
class JobPolicy:
    """The lifecycle rules a workload's jobs follow (from its vcjob template)."""

    task_policies: tuple[LifecyclePolicy, ...] = ()
    job_policies: tuple[LifecyclePolicy, ...] = ()
    max_retry: int = DEFAULT_MAX_RETRY
    grace_s: float = DEFAULT_GRACE_SECONDS
    template: str = ""
    #: How long the preStop checkpoint takes on a spot notice (the Workload's checkpointSeconds; 0: none).
    checkpoint_s: float = 0.0

    def action(self, event: JobEvent) -> JobAction | None:
        """The action for an event (task policies first), or None when only a sync follows."""
        for policy in (*self.task_policies, *self.job_policies):
            if event in policy.events or JobEvent.ANY in policy.events:
                return policy.action
        return None


def grace_seconds(job: Job) -> float:
    """terminationGracePeriodSeconds of the first task's pod template (Kubernetes' 30 s if unset)."""
    tasks = job.raw.get("spec", {}).get("tasks") or [{}]
    template: Mapping[str, Any] = (tasks[0] or {}).get("template") or {}
    value = (template.get("spec") or {}).get("terminationGracePeriodSeconds")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else DEFAULT_GRACE_SECONDS


def job_policy(job: Job, checkpoint_s: float = 0.0) -> JobPolicy:
    """A vcjob's policies, maxRetry and grace period as one JobPolicy."""
    task_policies = job.tasks[0].policies if job.tasks else ()
    return JobPolicy(task_policies, job.policies, job.max_retry, grace_seconds(job), job.name, checkpoint_s)
