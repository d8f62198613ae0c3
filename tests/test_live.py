"""The live control plane on simulated time: submissions (in batches, all or nothing), cycles, agents'
reports, lifecycle policies on failures and evictions, and live queue edits."""

from __future__ import annotations

import pytest

from tidegate.clock import SimClock
from tidegate.live.control_plane import ControlPlane
from tidegate.live.jobs import AlreadyExists, Conflict, JobPhase, NotFound
from tidegate.live.queue_manifests import merge_patch
from tidegate.model.errors import ManifestErrors
from tidegate.model.manifests import load_text
from tidegate.model.objects import PodPhase

CLUSTER = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "16", memory: 128Gi, nvidia.com/gpu: "4", pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
status: {allocatable: {cpu: "16", memory: 128Gi, nvidia.com/gpu: "4", pods: "110"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: dev}
spec: {weight: 1}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: prod}
spec: {weight: 1}
"""
RECLAIMING = """
---
apiVersion: tidegate.io/v1alpha1
kind: SchedulerConfiguration
metadata: {name: reclaiming}
actions: "enqueue, allocate, reclaim, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}, {name: binpack}]
"""
RESTART_ON_EVICTION = "policies: [{event: PodEvicted, action: RestartJob}]"


def vcjob(
    name: str,
    queue: str = "dev",
    replicas: int = 1,
    gpus: int = 1,
    policies: str = "",
    retry: int = 3,
    pod_spec: str = "",
) -> str:
    """A vcjob of one task; `pod_spec` is more of the pods' spec on one line (e.g. a nodeSelector)."""
    return f"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: {name}}}
spec:
  queue: {queue}
  maxRetry: {retry}
  minAvailable: {replicas}
  {policies}
  tasks:
  - name: worker
    replicas: {replicas}
    template:
      spec:
        {pod_spec}
        containers: [{{name: main, resources: {{requests: {{cpu: "1", nvidia.com/gpu: "{gpus}"}}}}}}]
"""


def plane(extra: str = "") -> tuple[ControlPlane, SimClock]:
    clock = SimClock()
    return ControlPlane.from_manifests(load_text(CLUSTER + extra, "cluster.yaml"), clock), clock


def batch(*docs: str) -> str:
    return "---".join(docs)


def pods_of(p: ControlPlane, key: str) -> list[str]:
    return [pod.key for pod in p.jobs[key].pods]


def succeed(p: ControlPlane, key: str) -> None:
    for pod in pods_of(p, key):
        p.report_pod(pod, PodPhase.SUCCEEDED)


def test_a_batch_is_scheduled_and_completes_when_every_pod_has_succeeded() -> None:
    p, clock = plane()
    assert p.submit(batch(vcjob("a", replicas=2, gpus=2), vcjob("b", "prod", replicas=2, gpus=2))) == [
        "default/a",
        "default/b",
    ]
    assert p.jobs["default/a"].phase is JobPhase.PENDING
    p.cycle()
    assert {key: job.phase for key, job in p.jobs.items()} == {
        "default/a": JobPhase.RUNNING,
        "default/b": JobPhase.RUNNING,
    }
    on_nodes = {pod["name"] for node in ("n1", "n2") for pod in p.views.node_pods(node)}
    assert on_nodes == {f"default/{job}-worker-{i}" for job in "ab" for i in range(2)}
    clock.call_at(60.0, lambda: None)
    clock.run()
    p.report_pod("default/a-worker-0", PodPhase.SUCCEEDED)
    assert p.jobs["default/a"].phase is JobPhase.RUNNING  # one pod of two
    p.report_pod("default/a-worker-1", PodPhase.SUCCEEDED)
    job = p.jobs["default/a"]
    assert (job.phase, job.started, job.finished) == (JobPhase.COMPLETED, 0.0, 60.0)
    assert {pod["name"] for node in ("n1", "n2") for pod in p.views.node_pods(node)} == {
        "default/b-worker-0",
        "default/b-worker-1",
    }


def test_a_succeeded_pod_frees_its_share_while_its_gang_runs_on() -> None:
    p, _ = plane()
    p.submit(batch(vcjob("gang", replicas=2, gpus=4), vcjob("next", gpus=4)))
    p.cycle()
    assert p.jobs["default/next"].waiting
    p.report_pod("default/gang-worker-0", PodPhase.SUCCEEDED)
    p.cycle()
    assert p.jobs["default/gang"].phase is JobPhase.RUNNING and p.jobs["default/next"].phase is JobPhase.RUNNING
    assert sorted(pod["name"] for node in ("n1", "n2") for pod in p.views.node_pods(node)) == [
        "default/gang-worker-1",
        "default/next-worker-0",
    ]


def test_a_job_waits_with_the_scheduler_s_reason_until_room_frees() -> None:
    p, _ = plane()
    p.submit(batch(vcjob("big", gpus=4), vcjob("big2", gpus=4), vcjob("late", gpus=4)))
    p.cycle()
    late = p.jobs["default/late"]
    assert late.waiting and late.reason == "queue dev at capability nvidia.com/gpu 8/8"
    assert p.metrics()[0].pending == 1 and p.metrics()[0].running == 2
    succeed(p, "default/big")
    p.cycle()
    assert late.phase is JobPhase.RUNNING and late.reason == ""


def test_a_submission_to_a_queue_that_does_not_take_its_namespace_is_refused_naming_the_queue_field() -> None:
    team_a = "metadata: {name: teams, annotations: {tidegate.io/namespaces: team-a}}\nspec: {weight: 1}"
    p, _ = plane("---\napiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\n" + team_a + "\n")
    with pytest.raises(ManifestErrors) as caught:
        p.submit(vcjob("theirs", queue="teams"))
    ((field, message),) = {(e.field, e.message) for e in caught.value.errors}
    assert field == "spec.queue" and "takes work from namespace(s) team-a only, not default" in message
    accepted = vcjob("mine", queue="teams").replace(
        "metadata: {name: mine}", "metadata: {name: mine, namespace: team-a}"
    )
    assert p.submit(accepted) == ["team-a/mine"]


def test_a_submission_of_more_pods_than_can_be_built_is_refused_whole_before_any_is_built() -> None:
    p, _ = plane()
    many = batch(*(vcjob(f"j{i}", replicas=8000, gpus=0) for i in range(3)))
    with pytest.raises(ManifestErrors, match=r"24,000 pods in all: a submission creates at most 20,000"):
        p.submit(many)
    assert p.jobs == {}


def test_a_submission_of_nothing_is_refused_and_nothing_is_stored() -> None:
    """100 MB of comments was accepted as a batch of no job, which the store kept for ever."""
    p, _ = plane()
    for nothing in ("# only a comment\n" * 3, "", "---\n---\n"):
        with pytest.raises(ManifestErrors, match="no objects passed: the input holds no document"):
            p.submit(nothing, "POST /jobs")
    assert p._new_batches == [] and p.jobs == {}


def test_a_submission_is_all_or_nothing_and_errors_name_document_object_and_field() -> None:
    p, _ = plane()
    with pytest.raises(ManifestErrors) as caught:
        p.submit(batch(vcjob("ok"), vcjob("lost", queue="nope"), vcjob("many", gpus=0).replace('"0"', '"x"')))
    problems = {(e.source.index, e.kind, e.name, e.field) for e in caught.value.errors}
    assert (1, "Job", "lost", "spec.queue") in problems
    assert any(index == 2 and kind == "Job" for index, kind, _, _ in problems)  # the bad quantity
    assert p.jobs == {}  # the valid first document was not accepted either
    p.submit(vcjob("ok"))
    with pytest.raises(AlreadyExists, match=r"Job/ok field metadata.name: job default/ok already exists") as there:
        p.submit(vcjob("ok"))
    assert (there.value.kind, there.value.name, [e.name for e in there.value.errors]) == ("Job", "ok", ["ok"])
    with pytest.raises(ManifestErrors) as both:  # with other problems, every one at once
        p.submit(batch(vcjob("ok"), vcjob("lost", queue="nope")))
    assert [(e.name, e.field) for e in both.value.errors] == [("lost", "spec.queue"), ("ok", "metadata.name")]


def test_a_submission_holds_only_workloads() -> None:
    p, _ = plane()
    node = CLUSTER.split("---")[0]
    with pytest.raises(ManifestErrors, match=r"Node/n1 field kind: submit Job, PodGroup, Pod objects"):
        p.submit(batch(vcjob("a"), node))
    with pytest.raises(ManifestErrors, match=r"no node offers example\.com/fpga"):
        p.submit(vcjob("fpga").replace("nvidia.com/gpu", "example.com/fpga"))


def test_bare_pods_and_podgroups_are_jobs_too() -> None:
    p, _ = plane()
    bare = """
apiVersion: v1
kind: Pod
metadata: {name: notebook, annotations: {scheduling.volcano.sh/queue-name: prod}}
spec: {containers: [{name: main, resources: {requests: {cpu: "1", nvidia.com/gpu: "1"}}}]}
"""
    assert p.submit(bare) == ["default/podgroup-notebook"]
    p.cycle()
    assert p.jobs["default/podgroup-notebook"].phase is JobPhase.RUNNING
    with pytest.raises(AlreadyExists, match=r"Pod/notebook field metadata\.name: job default/podgroup-notebook"):
        p.submit(bare)


def test_a_failed_pod_restarts_its_job_by_policy_until_max_retry() -> None:
    policy = "policies: [{event: PodFailed, action: RestartJob}]"
    p, _ = plane()
    p.submit(vcjob("flaky", replicas=2, policies=policy, retry=2))
    p.cycle()
    p.report_pod("default/flaky-worker-1", PodPhase.FAILED, "OOMKilled")
    job = p.jobs["default/flaky"]
    assert (job.phase, job.retries) == (JobPhase.PENDING, 1)
    assert "pod default/flaky-worker-1 failed: OOMKilled; PodFailed -> RestartJob" in job.reason
    assert all(not pod.node_name for pod in job.pods) and p.views.node_pods("n1") == p.views.node_pods("n2") == []
    p.cycle()
    assert job.phase is JobPhase.RUNNING
    p.report_pod("default/flaky-worker-0", PodPhase.FAILED)
    assert (job.phase, job.retries) == (JobPhase.FAILED, 2)
    assert "retry 2 reached maxRetry 2" in job.reason
    assert [pod.phase for pod in job.pods] == [PodPhase.FAILED, PodPhase.FAILED]  # the other one was stopped
    with pytest.raises(Conflict, match="job default/flaky is Failed"):
        p.report_pod("default/flaky-worker-1", PodPhase.SUCCEEDED)


def test_a_failed_pod_without_a_policy_fails_nothing_its_pods_are_recreated() -> None:
    p, _ = plane()
    p.submit(vcjob("plain"))
    p.cycle()
    p.report_pod("default/plain-worker-0", PodPhase.FAILED)
    job = p.jobs["default/plain"]
    assert (job.phase, job.retries) == (JobPhase.PENDING, 0)


def test_an_evicted_job_follows_its_policy() -> None:
    # dev borrows the whole cluster while prod is idle; prod's job arrives and reclaims half of it. The
    # evicted job's policy restarts it, and it waits for room again.
    p, _ = plane(RECLAIMING)
    p.submit(batch(*(vcjob(f"d{i}", gpus=4, policies=RESTART_ON_EVICTION) for i in range(2))))
    p.cycle()
    p.submit(vcjob("urgent", "prod", gpus=4))
    p.cycle()  # reclaim evicts one dev job for prod
    restarted = [job for key, job in p.jobs.items() if key.startswith("default/d") and job.phase is JobPhase.PENDING]
    assert len(restarted) == 1 and restarted[0].retries == 1
    assert "evicted: reclaimed by queue prod for default/urgent; PodEvicted -> RestartJob" in restarted[0].reason
    p.cycle()
    assert p.jobs["default/urgent"].phase is JobPhase.RUNNING


def test_patching_a_queue_takes_effect_at_the_next_cycle() -> None:
    p, _ = plane()
    p.patch_queue("dev", {"spec": {"capability": {"nvidia.com/gpu": 2}}})
    p.submit(batch(*(vcjob(f"j{i}") for i in range(4))))
    p.cycle()
    waiting = [job for job in p.jobs.values() if job.waiting]
    assert len(waiting) == 2 and all("capability nvidia.com/gpu 2/2" in job.reason for job in waiting), waiting
    p.patch_queue("dev", {"spec": {"capability": None}})  # null deletes: no cap
    p.cycle()
    assert all(job.phase is JobPhase.RUNNING for job in p.jobs.values())
    assert p.patch_queue("dev", {"spec": {"weight": 10}}).weight == 10
    assert p.views.queue_view("dev")["spec"]["weight"] == 10


def test_a_bad_queue_patch_names_the_field_and_changes_nothing() -> None:
    p, _ = plane()
    with pytest.raises(ManifestErrors) as caught:
        p.patch_queue("dev", {"spec": {"weight": "ten"}})
    (error,) = caught.value.errors
    assert (error.source.file, error.kind, error.name, error.field) == (
        "PATCH /queues/dev",
        "Queue",
        "dev",
        "spec.weight",
    )
    with pytest.raises(ManifestErrors, match=r"metadata\.name: a queue cannot be renamed"):
        p.patch_queue("dev", {"metadata": {"name": "other"}})
    with pytest.raises(ManifestErrors, match=r"spec\.parent"):
        p.patch_queue("dev", {"spec": {"parent": "nope"}})
    with pytest.raises(NotFound):
        p.patch_queue("nope", {"spec": {"weight": 2}})
    assert p.queues["dev"].weight == 1


def test_deleting_a_job_frees_its_nodes() -> None:
    p, _ = plane()
    p.submit(vcjob("a", gpus=4))
    p.cycle()
    p.delete_job("default/a")
    assert "default/a" not in p.jobs and p.views.node_pods("n1") == p.views.node_pods("n2") == []
    with pytest.raises(NotFound):
        p.delete_job("default/a")


def test_a_cycle_runs_every_period_on_the_clock() -> None:
    p, clock = plane()
    p.start(clock, period=1.0)
    clock.call_at(0.5, lambda: p.submit(vcjob("a")))
    clock.run(until=3.0)
    assert p.cycles == 4 and p.jobs["default/a"].started == 1.0
    p.stop()
    clock.run()
    assert p.cycles == 4


def test_the_loop_outlives_a_failing_cycle_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    p, clock = plane()
    real = p.core.cycle
    monkeypatch.setattr(p.core, "cycle", lambda now: 1 / 0)
    p.start(clock, period=1.0)
    clock.run(until=1.0)
    assert (p.failed_cycles, p.last_error) == (2, "ZeroDivisionError: division by zero")
    monkeypatch.setattr(p.core, "cycle", real)
    clock.run(until=2.0)
    assert (p.failed_cycles, p.last_error, p.cycles) == (2, "", 1)


def test_merge_patch_follows_rfc_7386() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}}
    assert merge_patch(target, {"a": "z", "c": {"f": None}}) == {"a": "z", "c": {"d": "e"}}
    assert merge_patch({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}
    assert merge_patch({"a": "b"}, ["c"]) == ["c"]
    assert merge_patch({"e": None}, {"a": 1}) == {"e": None, "a": 1}
