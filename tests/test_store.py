"""The live control plane's store: a control plane restarted on the same folder and store continues exactly
where the last one stopped (jobs, pods on their nodes, events, queue patches), and the write path writes
only what changed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.error
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from postgres_server import PASSWORD, PASSWORD_USER, new_database, postgres_server
from sqlalchemy import event, func, select, text
from test_live import CLUSTER, RECLAIMING, RESTART_ON_EVICTION, batch, vcjob
from test_server import SEED, _call, _free_port

from tidegate.clock import SimClock
from tidegate.live.control_plane import FOLDER_BATCH_FILE, ControlPlane
from tidegate.live.jobs import JobPhase
from tidegate.model.errors import ManifestErrors, Source
from tidegate.model.manifests import load_text
from tidegate.model.objects import PodPhase
from tidegate.store import StoreError
from tidegate.store.lease import StoreLease
from tidegate.store.sql import Store, meta
from tidegate.store.sql import batches as batches_table
from tidegate.store.sql import jobs as jobs_table
from tidegate.store.sql import queues as queues_table


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """One PostgreSQL server for the session (tests/postgres_server.py)."""
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new empty store in each database the store is tested on: a SQLite file, a PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    return new_database(request.getfixturevalue("postgres"))


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = Store(store_url)
    yield opened
    opened.close()


def start(store: Store | None, at: float = 0.0, cluster: str = CLUSTER + RECLAIMING) -> tuple[ControlPlane, SimClock]:
    clock = SimClock(start=at)
    return ControlPlane.from_manifests(load_text(cluster, "cluster.yaml"), clock, store), clock


def advance(clock: SimClock, to: float) -> None:
    clock.call_at(to, lambda: None)
    clock.run()


#: What a queue shows as the last cycle computed it: a restarted control plane computes it again at its first.
LAST_CYCLE = ("deserved", "share", "overused")


def seen(p: ControlPlane, computed: bool = True) -> dict[str, Any]:
    """Everything the API shows (without `computed`, but the queues' figures of the last cycle: LAST_CYCLE)."""
    return {
        "jobs": p.views.jobs_view(),
        "queues": [{k: v for k, v in q.items() if computed or k not in LAST_CYCLE} for q in p.views.queues_view()],
        "nodes": p.views.nodes_view(),
        "agents": {name: p.views.node_pods(name) for name in p.nodes},
    }


def count_statements(store: Store) -> list[str]:
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        statements.append(f"{statement} {parameters}")

    event.listen(store.engine, "before_cursor_execute", record)
    return statements


def a_history(store: Store) -> tuple[ControlPlane, SimClock]:
    """Submit, cycle, report a pod, patch a queue, evict and restart a job by its policy."""
    p, clock = start(store)
    p.patch_queue("prod", {"spec": {"weight": 1, "capability": {"nvidia.com/gpu": 4}}})
    p.submit(batch(vcjob("d0", gpus=4, policies=RESTART_ON_EVICTION), vcjob("pair", replicas=2, gpus=2)), "one.yaml")
    p.cycle()
    advance(clock, 10.0)
    p.report_pod("default/pair-worker-0", PodPhase.SUCCEEDED)  # pair runs on with one pod
    p.submit(vcjob("urgent", "prod", gpus=4), "two.yaml")
    p.submit(vcjob("gone"), "three.yaml")
    p.delete_job("default/gone")
    advance(clock, 20.0)
    p.cycle()  # reclaim evicts a dev job for prod's urgent one; its policy restarts it
    advance(clock, 30.0)
    p.cycle()
    advance(clock, 40.0)
    p.cycle()
    return p, clock


def test_a_restarted_control_plane_continues_exactly(store: Store) -> None:
    before, clock = a_history(store)
    restarted = [job for job in before.jobs.values() if job.retries == 1]
    assert len(restarted) == 1 and restarted[0].waiting, before.jobs_view()  # the history did what it says
    assert before.jobs["default/urgent"].phase is JobPhase.RUNNING
    before.store = None  # the old one goes on in memory only: both must decide alike from here
    after, after_clock = start(store, at=clock.now())
    assert seen(after, computed=False) == seen(before, computed=False)  # and LAST_CYCLE after a cycle (below)
    # The scheduler sees what it saw: the same groups in the same phases (admitted ones stay admitted),
    # the same ones waiting, the same room used on each node.
    assert {key: job.phase for key, job in after.core.jobs.items()} == {
        key: job.phase for key, job in before.core.jobs.items()
    }
    assert set(after.core.waiting) == set(before.core.waiting)
    assert (after.core.ssn.table.used == before.core.ssn.table.used).all()
    assert "default/gone" not in after.jobs  # a deleted job stays deleted
    assert after.queues["prod"].capability == before.queues["prod"].capability  # the patch survived
    assert after.core.ssn.queues["prod"].queue.capability == before.queues["prod"].capability
    for key, job in before.jobs.items():
        twin = after.jobs[key]
        assert (twin.phase, twin.reason, twin.retries, twin.pods, twin.events) == (
            job.phase,
            job.reason,
            job.retries,
            job.pods,
            job.events,
        )

    # The bound pods' resources are used from the first cycle: the restarted job still waits, for the
    # same reason, and its pending time keeps counting from when it was restarted.
    for plane, plane_clock in ((before, clock), (after, after_clock)):
        advance(plane_clock, 100.0)
        plane.cycle()
    waiting = after.jobs[restarted[0].key]
    assert waiting.waiting and waiting.reason and waiting.queued_since < 100.0
    assert after.metrics() == before.metrics()
    assert [m.pending_seconds for m in after.metrics() if m.queue == "dev"] == [100.0 - waiting.queued_since]
    assert seen(after) == seen(before)

    # A pod bound before the restart, reported succeeded after it, completes its job and frees its room.
    (running_dev,) = [k for k, j in after.jobs.items() if j.phase is JobPhase.RUNNING and j.group.queue == "dev"]
    for plane in (before, after):
        for pod in plane.jobs[running_dev].pods:
            if pod.phase is PodPhase.RUNNING:
                plane.report_pod(pod.key, PodPhase.SUCCEEDED)
        plane.cycle()
    assert after.jobs[running_dev].phase is JobPhase.COMPLETED
    assert after.jobs[restarted[0].key].phase is JobPhase.RUNNING
    assert seen(after) == seen(before)

    # And a third start sees what the second one wrote.
    third, _ = start(store, at=after_clock.now())
    assert seen(third, computed=False) == seen(after, computed=False)


def test_a_pod_nominated_by_reclaim_keeps_its_node_across_a_restart(store: Store) -> None:
    p, clock = start(store)
    p.submit(batch(*(vcjob(f"d{i}", gpus=4, policies=RESTART_ON_EVICTION) for i in range(2))))
    p.cycle()
    p.submit(vcjob("urgent", "prod", gpus=4))
    p.cycle()  # reclaim evicts a dev job; urgent's pod is nominated to the node it leaves
    (pod,) = p.jobs["default/urgent"].pods
    assert pod.nominated_node_name in ("n1", "n2") and not pod.node_name
    assert p.views.job_view("default/urgent")["pods"][0]["nominated_node"] == pod.nominated_node_name
    after, _ = start(store, at=clock.now())
    assert after.jobs["default/urgent"].pods == [pod]
    assert list(after.core.ssn.pipelined) == [pod.key]  # the scheduler holds the node's room for it
    after.cycle()
    (bound,) = after.jobs["default/urgent"].pods
    assert bound.node_name == pod.nominated_node_name and not bound.nominated_node_name
    third, _ = start(store, at=clock.now())
    assert third.jobs["default/urgent"].pods == [bound] and not third.core.ssn.pipelined


def test_a_cycle_that_changes_nothing_writes_nothing(store: Store) -> None:
    p, _ = start(store)
    p.submit(batch(*(vcjob(f"j{i}", gpus=4) for i in range(3))))
    statements = count_statements(store)
    p.cycle()  # two bound, one waits: three jobs written, in one transaction
    written = [s for s in statements if s.startswith(("UPDATE jobs", "INSERT INTO jobs"))]
    assert len(written) == 3, statements
    statements.clear()
    p.cycle()
    p.cycle()
    assert statements == []
    p.report_pod("default/j0-worker-0", PodPhase.SUCCEEDED)
    statements.clear()
    p.cycle()  # j2 binds: only it is written
    assert (
        [s for s in statements if s.startswith("UPDATE jobs")]
        == [s for s in statements if s.startswith("UPDATE jobs") and "default/j2" in s]
        != []
    )


def test_the_folder_s_jobs_are_accepted_once_and_a_deleted_one_stays_deleted(store: Store) -> None:
    folder = CLUSTER + "---" + vcjob("seeded") + "---" + vcjob("kept")
    p, _ = start(store, cluster=folder)
    assert list(p.jobs) == ["default/seeded", "default/kept"]
    p.cycle()
    p.delete_job("default/seeded")
    again, _ = start(store, at=5.0, cluster=folder)
    assert list(again.jobs) == ["default/kept"]
    assert again.jobs["default/kept"].phase is JobPhase.RUNNING
    assert again.jobs["default/kept"].submitted == 0.0
    without_store, _ = start(None, cluster=folder)
    assert list(without_store.jobs) == ["default/seeded", "default/kept"]


def test_a_job_on_a_node_the_folder_no_longer_has_restarts_pending(store: Store) -> None:
    p, _ = start(store)
    p.submit(batch(vcjob("a", gpus=4), vcjob("b", gpus=4)))
    p.cycle()
    (on_n2,) = [key for key, job in p.jobs.items() if job.pods[0].node_name == "n2"]
    one_node = CLUSTER.replace("metadata: {name: n2}", "metadata: {name: n3}")
    after, _ = start(store, at=50.0, cluster=one_node)
    job = after.jobs[on_n2]
    assert job.phase is JobPhase.PENDING and job.retries == 0 and job.queued_since == 50.0
    assert job.events[-2:] == [(50.0, "node n2 no longer exists"), (50.0, "restarted")]
    assert all(not pod.node_name for pod in job.pods) and after.views.node_pods("n3") == []
    after.cycle()
    assert job.phase is JobPhase.RUNNING and job.pods[0].node_name == "n3"
    assert start(store, at=60.0, cluster=one_node)[0].jobs[on_n2].pods[0].node_name == "n3"  # written


def test_a_patch_of_a_queue_the_folder_no_longer_has_is_dropped_with_a_warning(store: Store) -> None:
    p, _ = start(
        store, cluster=CLUSTER + "---\nkind: Queue\napiVersion: scheduling.volcano.sh/v1beta1\nmetadata: {name: old}\n"
    )
    p.patch_queue("old", {"spec": {"weight": 7}})
    p.patch_queue("dev", {"spec": {"weight": 3}})
    after, _ = start(store)
    assert after.warnings == ["queue old was patched live but the folder no longer has it: patch dropped"]
    assert after.queues["dev"].weight == 3 and "old" not in after.queues
    assert start(store)[0].warnings == []  # dropped from the store too


ORG = """
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: org}
spec: {capability: {nvidia.com/gpu: "8"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: alpha}
spec: {parent: org, capability: {nvidia.com/gpu: "4"}}
"""


def test_queue_patches_accepted_one_after_another_are_restored_together(store: Store) -> None:
    """alpha's 90 was accepted only after org's 100: restored one at a time, alpha's came first and was checked
    against the folder's org of 8, and the server could not start on its own store."""
    p, _ = start(store, cluster=CLUSTER + ORG)
    p.patch_queue("alpha", {"spec": {"capability": {"nvidia.com/gpu": "6"}}})  # stored first
    p.patch_queue("org", {"spec": {"capability": {"nvidia.com/gpu": "100"}}})
    p.patch_queue("alpha", {"spec": {"capability": {"nvidia.com/gpu": "90"}}})
    after, _ = start(store, cluster=CLUSTER + ORG)
    assert after.queues["alpha"].capability == p.queues["alpha"].capability
    assert after.queues["org"].capability == p.queues["org"].capability


def test_a_queue_patch_that_would_break_another_queue_is_refused_naming_it(store: Store) -> None:
    p, _ = start(store, cluster=CLUSTER + ORG)
    with pytest.raises(ManifestErrors) as caught:
        p.patch_queue("org", {"spec": {"capability": {"nvidia.com/gpu": "1"}}})
    (error,) = caught.value.errors
    assert (error.source.file, error.kind, error.name, error.field) == (
        "PATCH /queues/org",
        "Queue",
        "alpha",
        "spec.capability[nvidia.com/gpu]",
    )
    assert p.queues["org"].capability == start(None, cluster=CLUSTER + ORG)[0].queues["org"].capability


def test_a_stored_job_whose_queue_is_gone_is_an_error_naming_it(store: Store) -> None:
    p, _ = start(store)
    p.submit(vcjob("lost", queue="prod"), "lost.yaml")
    without_prod = CLUSTER.replace("metadata: {name: prod}", "metadata: {name: prod2}")
    with pytest.raises(ManifestErrors) as caught:
        start(store, cluster=without_prod)
    (error,) = caught.value.errors
    assert (error.kind, error.name, error.field) == ("Job", "lost", "spec.queue")
    assert "job(s) default/lost submitted as lost.yaml" in error.source.file and store.where in error.source.file


def _loosen(store: Store, file: str, old: str, new: str) -> None:
    """Rewrite a stored batch's text as an older, looser admission accepted it."""
    with store.engine.begin() as conn:
        (text_,) = conn.execute(select(batches_table.c.text).where(batches_table.c.file == file)).one()
        assert old in text_
        conn.execute(batches_table.update().where(batches_table.c.file == file).values(text=text_.replace(old, new)))


def test_a_stored_job_accepted_under_looser_rules_is_kept_with_a_warning_and_an_event(store: Store) -> None:
    """Validation ratcheting: half a GPU or a label value Kubernetes refuses (refused at admission since), or a
    queue Closed since the job was submitted, no longer stop the restart: the job is kept as it was, with a
    warning naming it and the rule, and an event on it. A job that cannot be rebuilt still stops it."""
    p, clock = start(store, cluster=CLUSTER)
    p.submit(vcjob("half", gpus=1), "half.yaml")
    p.submit(vcjob("labelled", replicas=2, gpus=1), "labelled.yaml")
    p.submit(vcjob("late", gpus=1), "late.yaml")
    p.submit(vcjob("big", queue="prod", replicas=2, gpus=4), "big.yaml")  # 5 of 8 GPUs free: it waits
    p.cycle()
    p.patch_queue("prod", {"spec": {"state": "Closed"}})
    assert [p.jobs[k].waiting for k in ("default/half", "default/labelled", "default/late", "default/big")] == [
        False,
        False,
        False,
        True,
    ]
    _loosen(store, "half.yaml", 'nvidia.com/gpu: "1"', 'nvidia.com/gpu: "0.5"')
    _loosen(
        store, "late.yaml", "metadata: {name: late}", 'metadata: {name: late, annotations: {sla-waiting-time: "soon"}}'
    )
    _loosen(store, "labelled.yaml", "    template:\n", '    template:\n      metadata: {labels: {team: "a b"}}\n')
    with pytest.raises(ManifestErrors):  # still refused as a new submission
        p.submit(vcjob("half2", gpus=1).replace('"1"}', '"0.5"}'), "half2.yaml")
    advance(clock, 60.0)
    after, _ = start(store, at=clock.now(), cluster=CLUSTER)
    half, labelled, big = (after.jobs[f"default/{name}"] for name in ("half", "labelled", "big"))
    assert (half.phase, labelled.phase, big.phase) == (JobPhase.RUNNING, JobPhase.RUNNING, p.jobs["default/big"].phase)
    assert (
        half.pods[0].requests["nvidia.com/gpu"] == 500
        and half.pods[0].gpu_indices == p.jobs["default/half"].pods[0].gpu_indices
    )
    assert [pod.labels["team"] for pod in labelled.pods] == ["a b", "a b"]
    assert [pod.node_name for pod in half.pods] == [pod.node_name for pod in p.jobs["default/half"].pods]
    assert len(after.warnings) == 4, after.warnings
    assert after.jobs["default/late"].group.waiting_time is None  # unreadable: none, as Volcano runs it
    rules = {
        "default/half": "Job/half field spec.tasks[0].template.spec.containers[0].resources.requests[nvidia.com/gpu]:"
        " '0.5': must be an integer",
        "default/labelled": "Job/labelled field spec.tasks[0].template.metadata.labels: value 'a b' of 'team'",
        "default/big": "Job/big field spec.queue: queue 'prod' is Closed",
        "default/late": "Job/late field metadata.annotations.sla-waiting-time: ",
    }
    for key, rule in rules.items():
        (warning,) = [w for w in after.warnings if f"job {key} submitted as" in w]
        assert (
            store.where in warning
            and rule in warning
            and warning.endswith("; kept as it was accepted (validation ratcheting)")
        ), warning
        (event,) = [m for _, m in after.jobs[key].events if m.startswith("kept at restart")]
        assert rule.split(" field ")[1].split(":")[0] in event
    after.cycle()  # the scheduler takes them as they are: the running stay, the waiting one waits
    assert after.jobs["default/half"].phase is JobPhase.RUNNING and after.jobs["default/big"].waiting
    again, _ = start(store, at=clock.now(), cluster=CLUSTER)
    assert len(again.warnings) == 4  # warned at every start, the event written once
    assert [m for _, m in again.jobs["default/half"].events].count(
        next(m for _, m in after.jobs["default/half"].events if m.startswith("kept at restart"))
    ) == 1
    gone = CLUSTER.replace("metadata: {name: prod}", "metadata: {name: prod2}")
    with pytest.raises(ManifestErrors) as caught:  # its queue gone: it cannot be rebuilt, as before
        start(store, cluster=gone)
    assert [(e.name, e.field) for e in caught.value.errors] == [("big", "spec.queue")]


def test_a_stored_queue_patch_accepted_under_looser_rules_is_kept_with_a_warning(store: Store) -> None:
    p, _ = start(store)
    p.patch_queue("dev", {"metadata": {"labels": {"team": "ml"}}, "spec": {"capability": {"nvidia.com/gpu": "6"}}})
    with store.engine.begin() as conn:  # as accepted before labels and whole GPUs were checked
        manifest = conn.execute(select(queues_table.c.manifest).where(queues_table.c.name == "dev")).scalar_one()
        manifest["metadata"]["labels"]["team"] = "m l"
        manifest["spec"]["capability"]["nvidia.com/gpu"] = "5.5"
        conn.execute(queues_table.update().where(queues_table.c.name == "dev").values(manifest=manifest))
    after, _ = start(store)
    assert after.queues["dev"].capability is not None and after.queues["dev"].capability["nvidia.com/gpu"] == 5500
    assert len(after.warnings) == 2 and all(f"store {store.where}: queue dev" in w for w in after.warnings)
    assert "Queue/dev field metadata.labels: value 'm l' of 'team'" in after.warnings[0]
    assert "spec.capability[nvidia.com/gpu]: '5.5': must be an integer" in after.warnings[1]


def test_a_submission_the_store_cannot_write_is_not_accepted(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    p, _ = start(store)
    p.submit(vcjob("first"))

    def broken() -> Any:
        raise StoreError("store is down")

    with monkeypatch.context() as patched:
        patched.setattr(store, "write", broken)
        with pytest.raises(StoreError):
            p.submit(vcjob("second"))
        assert list(p.jobs) == ["default/first"] and list(p.core.jobs) == ["default/first"]
        with pytest.raises(StoreError):
            p.cycle()  # bound in memory; written with the next change
    assert p.jobs["default/first"].phase is JobPhase.RUNNING
    p.submit(vcjob("second"))
    assert start(store)[0].jobs["default/first"].phase is JobPhase.RUNNING


def test_a_store_of_a_newer_schema_is_refused(store: Store) -> None:
    assert store.load() is None  # a new store: tables made, no control plane started on it yet
    with store.engine.begin() as conn:
        conn.execute(meta.update().where(meta.c.name == "schema_version").values(value="99"))
    newer = Store(store.url)
    with pytest.raises(StoreError, match=r"schema version 99; this tidegate reads up to 3"):
        newer.load()
    newer.close()
    with pytest.raises(StoreError, match=r"store nosuch://"):
        Store("nosuch://x")


def test_a_store_of_schema_version_1_is_brought_up_to_date_and_its_jobs_kept(store: Store) -> None:
    p, _ = start(store)
    p.submit(vcjob("first"))
    p.cycle()
    with store.engine.begin() as conn:  # as a version-1 store was written: no queue column, no nominations
        conn.execute(text("ALTER TABLE jobs DROP COLUMN queue"))
        conn.execute(meta.update().where(meta.c.name == "schema_version").values(value="1"))
        for key, pods in conn.execute(select(jobs_table.c.key, jobs_table.c.pods)).all():
            old_pods = [pod[:4] for pod in pods]
            conn.execute(jobs_table.update().where(jobs_table.c.key == key).values(pods=old_pods))
    store.close()
    old = Store(store.url)
    again, _ = start(old)
    assert again.jobs["default/first"].phase is JobPhase.RUNNING and again.jobs["default/first"].group.queue == "dev"
    with old.engine.connect() as conn:
        assert conn.execute(select(meta.c.value).where(meta.c.name == "schema_version")).scalar_one() == "3"
        assert conn.execute(select(jobs_table.c.queue)).scalars().all() == [""]
    again.submit(vcjob("second"))
    with old.engine.connect() as conn:
        assert conn.execute(select(jobs_table.c.queue).order_by(jobs_table.c.id)).scalars().all() == ["", "dev"]
    old.close()


def test_a_folder_job_s_stored_text_rebuilds_it(store: Store) -> None:
    folder = CLUSTER + "---" + vcjob("seeded", replicas=2)
    p, _ = start(store, cluster=folder)
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(jobs_table)).scalar_one() == 1
    again, _ = start(store, cluster=folder)
    rebuilt, first = again.jobs["default/seeded"], p.jobs["default/seeded"]
    assert [replace(pod, source=Source()) for pod in rebuilt.template] == [
        replace(pod, source=Source()) for pod in first.template
    ]
    assert replace(rebuilt.group, source=Source()) == replace(first.group, source=Source())
    assert rebuilt.group.source.file == FOLDER_BATCH_FILE


def _serve(folder: Path, port: int, store: str, log: Path, *options: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "tidegate.cli.main", "serve", str(folder), "--port", str(port)]
    with log.open("ab") as output:
        return subprocess.Popen(
            [*command, "--period", "0.1", "--store", store, *options], stdout=output, stderr=subprocess.STDOUT
        )


def _wait_for(url: str, server: subprocess.Popen[bytes], log: Path, deadline: float) -> Any:
    while True:
        try:
            return _call(url)
        except (urllib.error.URLError, ConnectionError):
            assert server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"no answer from {url}"
            time.sleep(0.2)


def test_tidegate_serve_keeps_running_jobs_across_a_restart(tmp_path: Path, store_url: str) -> None:
    url = store_url
    log = tmp_path / "serve.log"
    deadline = time.monotonic() + 60
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    server = _serve(SEED, port, url, log)
    try:
        _wait_for(f"{base}/healthz", server, log, deadline)
        _call(f"{base}/jobs", "POST", vcjob("kept", queue="dev").encode())
        while (job := _call(f"{base}/jobs/default/kept"))["phase"] != "Running":
            assert time.monotonic() < deadline, "the job was not scheduled"
            time.sleep(0.1)
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert f"state lives in {url}" in log.read_text()
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    server = _serve(SEED, port, url, log)
    try:
        _wait_for(f"{base}/healthz", server, log, deadline)
        again = _call(f"{base}/jobs/default/kept")
        assert again["phase"] == "Running" and again["pods"] == job["pods"] and job["pods"][0]["node"]
        assert again["events"] == job["events"]
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_the_tidegate_command_starts_without_loading_sqlalchemy_uvicorn_or_matplotlib() -> None:
    # matplotlib would also write its cache at import, which a read-only container (deploy/) does not allow
    loaded = "('sqlalchemy', 'uvicorn', 'matplotlib')"
    code = f"import sys, tidegate.cli.main; print(sorted(m for m in {loaded} if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


def test_one_server_at_a_time_holds_a_store(store_url: str) -> None:
    now = [0.0]
    stores = Store(store_url), Store(store_url)
    a, b = (StoreLease(opened, name, 15, 2, lambda: now[0]) for opened, name in zip(stores, "ab", strict=True))
    assert a.hold() and stores[0].holder == "a"
    assert not stores[1].claim_lease("b", None)  # two first claims: the record is made once
    assert not b.hold() and b.seen_holder == "a" and stores[1].holder is None
    now[0] = 10.0
    assert a.hold()  # renewed when due
    with stores[0].write() as writer:  # a holder's write renews too
        writer.mark_started()
    assert not b.hold() and b.renewals_seen == 1  # b saw a alive
    now[0] = 24.9
    assert not b.hold()  # a's record unchanged for 14.9 s by b's clock
    now[0] = 25.0
    assert b.hold() and b.renewals_seen == 1  # unchanged for 15 s: a stopped; b takes over
    with pytest.raises(StoreError, match="this server no longer holds it"), stores[0].write() as writer:
        writer.mark_started()
    assert not a.hold() and a.seen_holder == "b"  # a learns it lost the store
    b.release()
    assert a.hold() and a.seen_holder == ""  # released on a clean stop: taken at once
    for opened in stores:
        opened.close()


def test_a_second_tidegate_serve_on_a_store_refuses_or_stands_by(tmp_path: Path, store_url: str) -> None:
    url = store_url
    lease = ("--store-lease-seconds", "3")
    deadline = time.monotonic() + 90
    ports = [_free_port() for _ in range(3)]
    logs = [tmp_path / f"serve-{i}.log" for i in range(3)]
    first = _serve(SEED, ports[0], url, logs[0], *lease)
    servers = [first]
    try:
        _wait_for(f"http://127.0.0.1:{ports[0]}/healthz", first, logs[0], deadline)
        _call(f"http://127.0.0.1:{ports[0]}/jobs", "POST", vcjob("kept", queue="dev").encode())
        second = _serve(SEED, ports[1], url, logs[1], *lease)
        servers.append(second)
        assert second.wait(timeout=30) == 1  # refused: the first renews its hold
        assert f"store {url} is in use by" in " ".join(logs[1].read_text().split())
        standby = _serve(SEED, ports[2], url, logs[2], *lease, "--standby")
        servers.append(standby)
        # alive, not ready, and naming the holder while it waits
        waiting = _wait_for(f"http://127.0.0.1:{ports[2]}/healthz", standby, logs[2], deadline)
        assert waiting["ok"] and waiting["standby"] and waiting["store_held_by"]
        assert "standing by to take over" in logs[2].read_text()
        for path in ("readyz", "jobs/default/kept"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                _call(f"http://127.0.0.1:{ports[2]}/{path}")
            assert refused.value.code == 503
            refused.value.close()
        first.kill()  # no clean stop: the lease runs out
        first.wait(timeout=10)
        kept = _wait_for(f"http://127.0.0.1:{ports[2]}/jobs/default/kept", standby, logs[2], deadline)
        assert kept["events"][0]["message"] == "submitted"  # what the first accepted, served by the standby
        assert _call(f"http://127.0.0.1:{ports[2]}/readyz") == {"ready": True}
    finally:
        for server in servers:
            if server.poll() is None:
                server.terminate()
                server.wait(timeout=10)
    assert standby.returncode == 0  # a clean stop gives the store up
    again = _serve(SEED, ports[0], url, logs[0], *lease)
    try:
        _wait_for(f"http://127.0.0.1:{ports[0]}/healthz", again, logs[0], time.monotonic() + 20)
        assert "store held by" not in logs[0].read_text()  # taken at once
    finally:
        again.terminate()
        again.wait(timeout=10)


def test_a_holder_that_cannot_reach_its_store_keeps_the_lease_for_the_duration_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [0.0]
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    lease = StoreLease(store, "a", 15, 2, lambda: now[0])
    assert lease.hold()

    def unreachable() -> None:
        raise StoreError("store: connection refused")

    monkeypatch.setattr(store, "lease_record", unreachable)
    now[0] = 14.9
    assert lease.hold()  # renewing failed, but within the duration since the last renewal
    now[0] = 15.0
    assert not lease.hold() and not lease.holding  # a rival may take it over by now: stop
    monkeypatch.undo()
    assert lease.hold()  # reachable again and nobody took it: held again
    store.close()


#: Runs a command as root without the capabilities that let root write anywhere (so folder modes apply).
WITHOUT_ROOT_S_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]


def _serve_refused(store: str, cwd: Path, as_user: bool = False) -> str:
    """`tidegate serve` on the seed and `store`, as a process (`as_user`: as root without its permission
    override, when root runs the tests); it must exit 1 at once: its output, on one line."""
    command = [sys.executable, "-m", "tidegate.cli.main", "serve", str(SEED), "--port", str(_free_port())]
    command = [*WITHOUT_ROOT_S_OVERRIDE, *command] if as_user and os.geteuid() == 0 else command
    done = subprocess.run([*command, "--store", store], capture_output=True, text=True, timeout=60, cwd=cwd)
    assert done.returncode == 1, done.stdout + done.stderr
    output = done.stdout + done.stderr
    assert "Traceback" not in output and "store held by" not in output
    return " ".join(output.split())


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("folder", "{path} is a folder, not a SQLite file"),
        ("missing/state.db", "the folder {tmp}/missing does not exist"),
        ("notes.txt", "{path} is not a SQLite database"),
        ("notes.txt/state.db", "{tmp}/notes.txt is not a folder"),
    ],
)
def test_tidegate_serve_names_a_sqlite_store_it_cannot_open(tmp_path: Path, where: str, message: str) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "notes.txt").write_text("these are notes, not a database\n")
    path = tmp_path / where
    for store in (str(path), f"sqlite:///{path}"):
        said = _serve_refused(store, tmp_path)
        assert f"error: store sqlite:///{path}: {message.format(path=path, tmp=tmp_path)}" in said
    assert not (tmp_path / "missing").exists() and (tmp_path / "notes.txt").read_text().startswith("these")


def test_tidegate_serve_names_a_sqlite_folder_it_may_not_write(tmp_path: Path) -> None:
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("root may write anywhere, and there is no setpriv to run the server without that right")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    said = _serve_refused(str(locked / "state.db"), tmp_path, as_user=True)
    assert f"store sqlite:///{locked / 'state.db'}: the folder {locked} is not writable" in said
    assert list(locked.iterdir()) == []


def test_tidegate_serve_names_a_postgresql_store_it_cannot_reach(tmp_path: Path, postgres: str) -> None:
    port = _free_port()  # nothing listens there
    said = _serve_refused(f"postgresql+psycopg://postgres:s3cret@127.0.0.1:{port}/tidegate", tmp_path)
    assert f"error: store postgresql+psycopg://postgres:***@127.0.0.1:{port}/tidegate: " in said
    assert "Connection refused" in said and "s3cret" not in said
    server = postgres.removeprefix("postgresql+psycopg://postgres@").rstrip("/")
    wrong = f"postgresql+psycopg://{PASSWORD_USER}:wrong@{server}/postgres"
    said = _serve_refused(wrong, tmp_path)
    assert f"store postgresql+psycopg://{PASSWORD_USER}:***@{server}/postgres: " in said
    assert f'password authentication failed for user "{PASSWORD_USER}"' in said
    right = Store(f"postgresql+psycopg://{PASSWORD_USER}:{PASSWORD}@{server}/{PASSWORD_USER}")
    try:
        assert right.lease_record() is None  # the same server and role, with its password: opened
    finally:
        right.close()
