"""What a job does when its pods are evicted or fail: Volcano's vcjob lifecycle policies and maxRetry.

A simulated Workload names a vcjob (`jobTemplate`) whose policies all its jobs follow; a job submitted to
the live control plane follows its own. Either way the rules are those of Volcano's job controller
(pkg/controllers/job, `applyPolicies` and the running/restarting states):

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
from enum import StrEnum
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


class Resolution(StrEnum):
    RESTART = "restart"
    FAIL = "fail"
    COMPLETE = "complete"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the job controller does about an event: restart the job, or end it failed or completed."""

    resolution: Resolution
    #: The job's retry count afterwards (a restart by policy counts one; a plain sync does not).
    retries: int
    #: The rule that decided, e.g. "PodEvicted -> RestartJob, retry 3 reached maxRetry 3" ("" without one).
    rule: str


def verdict(policy: JobPolicy, event: JobEvent, retries: int) -> Verdict:
    """The policies' answer to `event` for a job that has been retried `retries` times so far."""
    action = policy.action(event)
    if action is None:  # Volcano only syncs the job: its missing pods are recreated, no retry counted
        return Verdict(Resolution.RESTART, retries, "")
    rule = f"{event} -> {action}"
    if action in RESTARTS:
        retries += 1
        if retries >= policy.max_retry:
            return Verdict(Resolution.FAIL, retries, f"{rule}, retry {retries} reached maxRetry {policy.max_retry}")
        return Verdict(Resolution.RESTART, retries, rule)
    if action in FAILS:
        return Verdict(Resolution.FAIL, retries, rule)
    if action is JobAction.COMPLETE_JOB:
        return Verdict(Resolution.COMPLETE, retries, rule)
    return Verdict(Resolution.RESTART, retries, rule)  # ResumeJob: nothing to resume here, so a sync
