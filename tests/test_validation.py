"""Admission checks across manifests: every rule, each error naming file, document, object and field."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tidegate.model.errors import ManifestError, Source
from tidegate.model.manifests import ManifestSet, load_manifests
from tidegate.model.validation import KNOWN_ACTIONS, KNOWN_PLUGINS, validate

SEED = Path(__file__).resolve().parent.parent / "examples" / "seed"


def check(tmp_path: Path, *documents: str) -> tuple[str, list[ManifestError]]:
    """Write the documents as one multi-document file; return its path and validate()'s errors."""
    path = tmp_path / "manifests.yaml"
    path.write_text("---\n".join(textwrap.dedent(doc).strip() + "\n" for doc in documents))
    ms = load_manifests([str(path)])
    assert ms.errors == [], ms.errors
    return str(path), validate(ms)


def the_error(errors: list[ManifestError], path: str, index: int, kind: str, name: str, field: str) -> ManifestError:
    """The one error, checked to name the file, document index, kind/name and field, also in its text."""
    assert len(errors) == 1, errors
    error = errors[0]
    assert (error.source, error.kind, error.name, error.field) == (Source(path, index), kind, name, field)
    assert str(error).startswith(f"{path}: document {index}: {kind}/{name} field {field}: ")
    return error


def queue(name: str, spec: str = "{}") -> str:
    return f"apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {{name: {name}}}\nspec: {spec}\n"


def job(spec: str, name: str = "j") -> str:
    return f"apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {{name: {name}}}\nspec: {spec}\n"


def podgroup(spec: str, name: str = "pg") -> str:
    return f"apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {{name: {name}}}\nspec: {spec}\n"


def conf(body: str) -> str:
    return f"apiVersion: tidegate.io/v1alpha1\nkind: SchedulerConfiguration\nmetadata: {{name: c}}\n{body}\n"


TASK = "{name: w, replicas: 2}"


def test_seed_validates_clean() -> None:
    ms: ManifestSet = load_manifests([str(SEED)])
    assert ms.errors == []
    assert validate(ms) == []


def test_validation_accepts_exactly_what_the_scheduler_can_run() -> None:
    from tidegate.scheduler.plugins import default_registry
    from tidegate.scheduler.scheduler import ACTIONS

    assert set(KNOWN_PLUGINS) == set(default_registry().names())
    assert set(KNOWN_ACTIONS) == set(ACTIONS)


def test_known_actions_and_plugins() -> None:
    assert KNOWN_ACTIONS == ("enqueue", "allocate", "backfill", "preempt", "reclaim")
    assert set(KNOWN_PLUGINS) == {
        "gang",
        "priority",
        "drf",
        "proportion",
        "capacity",
        "predicates",
        "nodeorder",
        "binpack",
        "gpushare",
        "sla",
        "conformance",
        "overcommit",
    }


# --- vcjob ------------------------------------------------------------------------------------------


def test_job_min_available_above_total_replicas(tmp_path: Path) -> None:
    path, errors = check(tmp_path, job(f"{{minAvailable: 5, tasks: [{TASK}, {{name: ps, replicas: 2}}]}}"))
    error = the_error(errors, path, 0, "Job", "j", "spec.minAvailable")
    assert "more than the 4 replicas" in error.message


def test_job_min_available_equal_to_replicas_is_fine(tmp_path: Path) -> None:
    assert check(tmp_path, job(f"{{minAvailable: 2, tasks: [{TASK}]}}"))[1] == []


def test_job_negative_min_available_and_max_retry(tmp_path: Path) -> None:
    _, errors = check(tmp_path, job(f"{{minAvailable: -1, maxRetry: -2, tasks: [{TASK}]}}"))
    assert [e.field for e in errors] == ["spec.minAvailable", "spec.maxRetry"]


def test_job_without_tasks(tmp_path: Path) -> None:
    path, errors = check(tmp_path, job("{tasks: []}"))
    the_error(errors, path, 0, "Job", "j", "spec.tasks")


def test_duplicated_task_names(tmp_path: Path) -> None:
    path, errors = check(tmp_path, job(f"{{tasks: [{TASK}, {{name: ps, replicas: 1}}, {TASK}]}}"))
    error = the_error(errors, path, 0, "Job", "j", "spec.tasks[2].name")
    assert "duplicated task name 'w'" in error.message


def test_task_name_must_be_a_dns_label(tmp_path: Path) -> None:
    path, errors = check(tmp_path, job("{tasks: [{name: Worker_1, replicas: 1}]}"))
    the_error(errors, path, 0, "Job", "j", "spec.tasks[0].name")


def test_negative_task_replicas(tmp_path: Path) -> None:
    path, errors = check(tmp_path, job("{minAvailable: 1, tasks: [{name: w, replicas: 2}, {name: b, replicas: -1}]}"))
    error = the_error(errors, path, 0, "Job", "j", "spec.tasks[1].replicas")
    assert "-1 is negative" in error.message


def test_task_min_available_above_replicas(tmp_path: Path) -> None:
    path, errors = check(tmp_path, job("{tasks: [{name: w, replicas: 2, minAvailable: 3}]}"))
    error = the_error(errors, path, 0, "Job", "j", "spec.tasks[0].minAvailable")
    assert "more than replicas 2" in error.message


def test_duplicated_job_policy_events(tmp_path: Path) -> None:
    policies = "[{event: PodFailed, action: RestartJob}, {events: [PodEvicted, PodFailed], action: AbortJob}]"
    path, errors = check(tmp_path, job(f"{{policies: {policies}, tasks: [{TASK}]}}"))
    error = the_error(errors, path, 0, "Job", "j", "spec.policies[1].events")
    assert "duplicated event PodFailed (already in spec.policies[0])" in error.message


def test_duplicated_task_policy_events(tmp_path: Path) -> None:
    policies = "[{event: TaskCompleted, action: CompleteJob}, {event: TaskCompleted, action: AbortJob}]"
    path, errors = check(tmp_path, job(f"{{tasks: [{TASK}, {{name: b, replicas: 1, policies: {policies}}}]}}"))
    the_error(errors, path, 0, "Job", "j", "spec.tasks[1].policies[1].event")


def test_the_same_event_in_job_and_task_policies_is_not_a_duplicate(tmp_path: Path) -> None:
    policy = "[{event: PodFailed, action: RestartJob}]"
    _, errors = check(tmp_path, job(f"{{policies: {policy}, tasks: [{{name: w, replicas: 1, policies: {policy}}}]}}"))
    assert errors == []


@pytest.mark.parametrize(
    ("policies", "field", "message"),
    [
        ("[{event: PodFailed, exitCode: 3, action: RestartJob}]", "spec.policies[0]", "not both"),
        ("[{action: RestartJob}]", "spec.policies[0]", "needs an event"),
        ("[{exitCode: 0, action: RestartJob}]", "spec.policies[0].exitCode", "0 is not"),
        (
            "[{exitCode: 3, action: RestartJob}, {exitCode: 3, action: AbortJob}]",
            "spec.policies[1].exitCode",
            "duplicated exitCode 3",
        ),
        ("[{event: '*', action: AbortJob}, {event: PodFailed, action: RestartJob}]", "spec.policies", "'*'"),
        ("[{event: PodPending, action: RestartJob}]", "spec.policies[0].event", "cannot be used"),
        ("[{event: OutOfSync, action: RestartJob}]", "spec.policies[0].event", "cannot be used"),
    ],
)
def test_policy_rules(tmp_path: Path, policies: str, field: str, message: str) -> None:
    path, errors = check(tmp_path, job(f"{{policies: {policies}, tasks: [{TASK}]}}"))
    assert message in the_error(errors, path, 0, "Job", "j", field).message


# --- queue references -------------------------------------------------------------------------------


def test_job_naming_a_missing_queue(tmp_path: Path) -> None:
    path, errors = check(tmp_path, queue("dev"), job(f"{{queue: research, tasks: [{TASK}]}}"))
    error = the_error(errors, path, 1, "Job", "j", "spec.queue")
    assert error.message == "queue 'research' does not exist"


def test_podgroup_naming_a_missing_queue(tmp_path: Path) -> None:
    path, errors = check(tmp_path, podgroup("{queue: research}"))
    the_error(errors, path, 0, "PodGroup", "pg", "spec.queue")


def test_builtin_default_queue_always_exists(tmp_path: Path) -> None:
    assert check(tmp_path, job(f"{{tasks: [{TASK}]}}"), podgroup("{queue: default}"))[1] == []


def test_root_queue_exists_but_takes_no_work(tmp_path: Path) -> None:
    path, errors = check(tmp_path, queue("dev", "{parent: root}"), job(f"{{queue: root, tasks: [{TASK}]}}"))
    error = the_error(errors, path, 1, "Job", "j", "spec.queue")
    assert "has child queues" in error.message and "only leaf queues" in error.message


def test_parent_queues_take_no_work(tmp_path: Path) -> None:
    path, errors = check(tmp_path, queue("ml"), queue("dev", "{parent: ml}"), podgroup("{queue: ml}"))
    the_error(errors, path, 2, "PodGroup", "pg", "spec.queue")


def test_closed_queue_takes_no_new_jobs(tmp_path: Path) -> None:
    path, errors = check(tmp_path, queue("dev", "{state: Closed}"), job(f"{{queue: dev, tasks: [{TASK}]}}"))
    assert "is Closed" in the_error(errors, path, 1, "Job", "j", "spec.queue").message


def test_running_podgroup_may_stay_in_a_closing_queue(tmp_path: Path) -> None:
    running = podgroup("{queue: dev}") + "status: {phase: Running}\n"
    assert check(tmp_path, queue("dev", "{state: Closing}"), running)[1] == []


def team_queue(name: str, namespaces: str, spec: str = "{}") -> str:
    meta = f"{{name: {name}, annotations: {{tidegate.io/namespaces: '{namespaces}'}}}}"
    return f"apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {meta}\nspec: {spec}\n"


def in_namespace(document: str, namespace: str) -> str:
    return document.replace("metadata: {name: ", f"metadata: {{namespace: {namespace}, name: ", 1)


def test_a_queue_takes_work_only_from_the_namespaces_it_names(tmp_path: Path) -> None:
    dev = team_queue("dev", "team-a, team-b")
    for namespace in ("team-a", "team-b"):
        assert check(tmp_path, dev, in_namespace(job(f"{{queue: dev, tasks: [{TASK}]}}"), namespace))[1] == []
    path, errors = check(tmp_path, dev, in_namespace(job(f"{{queue: dev, tasks: [{TASK}]}}"), "team-c"))
    message = the_error(errors, path, 1, "Job", "j", "spec.queue").message
    assert message == (
        "queue dev takes work from namespace(s) team-a, team-b only, not team-c (annotation tidegate.io/namespaces)"
    )
    path, errors = check(tmp_path, dev, podgroup("{queue: dev}"))  # the default namespace
    assert "not default" in the_error(errors, path, 1, "PodGroup", "pg", "spec.queue").message


def test_a_child_queue_takes_only_what_its_parent_takes(tmp_path: Path) -> None:
    ml, dev = team_queue("ml", "team-a"), queue("dev", "{parent: ml}")
    path, errors = check(tmp_path, ml, dev, in_namespace(podgroup("{queue: dev}"), "team-b"))
    assert (
        "queue ml takes work from namespace(s) team-a only"
        in the_error(errors, path, 2, "PodGroup", "pg", "spec.queue").message
    )
    assert check(tmp_path, ml, dev, in_namespace(podgroup("{queue: dev}"), "team-a"))[1] == []


def test_a_running_podgroup_stays_when_its_queue_stops_taking_its_namespace(tmp_path: Path) -> None:
    running = podgroup("{queue: dev}") + "status: {phase: Running}\n"
    assert check(tmp_path, team_queue("dev", "team-a"), running)[1] == []


@pytest.mark.parametrize("value", ["", "Team-A", "team_a", "a,,b", "-a", "x" * 64])
def test_a_bad_namespace_list_is_named(tmp_path: Path, value: str) -> None:
    path = tmp_path / "q.yaml"
    path.write_text(team_queue("dev", value))
    (error,) = load_manifests([str(path)]).errors
    assert (error.kind, error.name, error.field) == ("Queue", "dev", "metadata.annotations.tidegate.io/namespaces")
    assert "not a namespace name" in error.message


@pytest.mark.parametrize(
    ("metadata", "field"),
    [
        ("{name: x/y}", "metadata.name"),
        ("{name: UPPER}", "metadata.name"),
        ("{name: jöb}", "metadata.name"),
        (f"{{name: {'a' * 254}}}", "metadata.name"),
        ("{name: pg, namespace: a/b}", "metadata.namespace"),
        ("{name: pg, namespace: a.b}", "metadata.namespace"),
    ],
)
def test_names_and_namespaces_are_kubernetes_names(tmp_path: Path, metadata: str, field: str) -> None:
    """A namespace "a/b" made a job no URL could reach (`GET /jobs/{namespace}/{name}`)."""
    document = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: " + metadata + "\nspec: {}\n"
    _, errors = check(tmp_path, document)
    (error,) = [e for e in errors if e.field == field]
    assert error.kind == "PodGroup" and "is not a DNS-1123" in error.message


def test_dotted_names_are_kubernetes_names(tmp_path: Path) -> None:
    assert check(tmp_path, podgroup("{}", name="train.v2-0"), queue("team.a"))[1] == []


def test_bare_pod_queue_annotation_must_exist(tmp_path: Path) -> None:
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {scheduling.volcano.sh/queue-name: nope}}\n"
    path, errors = check(tmp_path, pod)
    the_error(errors, path, 0, "Pod", "p", "metadata.annotations.scheduling.volcano.sh/queue-name")


# --- queues -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("priority", "ok"), [(2**31 - 1, True), (-(2**31), True), (2**31, False), (10**30, False)])
def test_queue_priority_is_an_int32(tmp_path: Path, priority: int, ok: bool) -> None:
    path, errors = check(tmp_path, queue("q", f"{{priority: {priority}}}"))
    if ok:
        assert errors == []
    else:
        assert "32-bit" in the_error(errors, path, 0, "Queue", "q", "spec.priority").message


@pytest.mark.parametrize(("weight", "ok"), [(0, False), (1, True), (65535, True), (65536, False), (-3, False)])
def test_queue_weight_range(tmp_path: Path, weight: int, ok: bool) -> None:
    path, errors = check(tmp_path, queue("q", f"{{weight: {weight}}}"))
    if ok:
        assert errors == []
    else:
        assert "outside 1..65535" in the_error(errors, path, 0, "Queue", "q", "spec.weight").message


def test_queue_parent_must_exist(tmp_path: Path) -> None:
    path, errors = check(tmp_path, queue("dev", "{parent: ml}"))
    assert the_error(errors, path, 0, "Queue", "dev", "spec.parent").message == "parent queue 'ml' does not exist"


def test_queue_hierarchy_cycle(tmp_path: Path) -> None:
    path, errors = check(tmp_path, queue("a", "{parent: b}"), queue("b", "{parent: a}"), queue("c", "{parent: a}"))
    assert [(e.source.index, e.name, e.field) for e in errors] == [(0, "a", "spec.parent"), (1, "b", "spec.parent")]
    assert "cycle: a -> b -> a" in errors[0].message
    assert all(e.source.file == path for e in errors)


def test_self_parent_is_a_cycle(tmp_path: Path) -> None:
    path, errors = check(tmp_path, queue("a", "{parent: a}"))
    assert "a -> a" in the_error(errors, path, 0, "Queue", "a", "spec.parent").message


def test_root_queue_cannot_have_a_parent(tmp_path: Path) -> None:
    path, errors = check(tmp_path, queue("dev"), queue("root", "{parent: dev}"))
    the_error(errors, path, 1, "Queue", "root", "spec.parent")


def test_guarantee_above_deserved(tmp_path: Path) -> None:
    spec = '{deserved: {nvidia.com/gpu: "8"}, guarantee: {resource: {nvidia.com/gpu: "16"}}}'
    path, errors = check(tmp_path, queue("q", spec))
    error = the_error(errors, path, 0, "Queue", "q", "spec.guarantee.resource[nvidia.com/gpu]")
    assert error.message == "guarantee nvidia.com/gpu=16 is above deserved nvidia.com/gpu=8"


def test_guarantee_above_capability(tmp_path: Path) -> None:
    spec = "{capability: {memory: 1Gi}, guarantee: {resource: {memory: 2Gi}}}"
    path, errors = check(tmp_path, queue("q", spec))
    assert (
        "above capability memory=1Gi"
        in the_error(errors, path, 0, "Queue", "q", "spec.guarantee.resource[memory]").message
    )


def test_deserved_above_capability_is_allowed(tmp_path: Path) -> None:
    # capability is the local physical cap; deserved also counts the elastic cloud share.
    spec = (
        '{capability: {nvidia.com/gpu: "128"}, deserved: {nvidia.com/gpu: "256"}, '
        'guarantee: {resource: {nvidia.com/gpu: "64"}}}'
    )
    assert check(tmp_path, queue("q", spec))[1] == []


def test_child_capability_above_parent_capability(tmp_path: Path) -> None:
    parent = queue("ml", '{capability: {nvidia.com/gpu: "64", cpu: "100"}}')
    child = queue("dev", '{parent: ml, capability: {nvidia.com/gpu: "128", memory: 1Ti}}')
    path, errors = check(tmp_path, parent, child)
    error = the_error(errors, path, 1, "Queue", "dev", "spec.capability[nvidia.com/gpu]")
    assert "above parent queue 'ml'" in error.message


def test_a_zero_capability_caps_guarantees_and_children_except_for_cpu_and_memory(tmp_path: Path) -> None:
    # nvidia.com/gpu "0" is a cap of 0; cpu "0" is no cap (Volcano raises it to MaxFloat64).
    parent = queue("ml", '{capability: {nvidia.com/gpu: "0", cpu: "0"}, guarantee: {resource: {cpu: "4"}}}')
    child = queue("dev", '{parent: ml, capability: {nvidia.com/gpu: "2", cpu: "8"}}')
    greedy = queue("greedy", '{capability: {nvidia.com/gpu: "0"}, guarantee: {resource: {nvidia.com/gpu: "1"}}}')
    path, errors = check(tmp_path, parent, child, greedy)
    assert [(e.source, e.name, e.field) for e in errors] == [
        (Source(path, 1), "dev", "spec.capability[nvidia.com/gpu]"),
        (Source(path, 2), "greedy", "spec.guarantee.resource[nvidia.com/gpu]"),
    ]
    assert errors[0].message == "nvidia.com/gpu=2 is above parent queue 'ml''s capability nvidia.com/gpu=0"
    assert errors[1].message == "guarantee nvidia.com/gpu=1 is above capability nvidia.com/gpu=0"


def test_children_guarantees_and_deserved_must_fit_the_parents(tmp_path: Path) -> None:
    parent = queue("ml", '{guarantee: {resource: {nvidia.com/gpu: "10"}}, deserved: {nvidia.com/gpu: "100"}}')
    a = queue("a", '{parent: ml, deserved: {nvidia.com/gpu: "60"}, guarantee: {resource: {nvidia.com/gpu: "6"}}}')
    b = queue("b", '{parent: ml, deserved: {nvidia.com/gpu: "60"}, guarantee: {resource: {nvidia.com/gpu: "6"}}}')
    path, errors = check(tmp_path, parent, a, b)
    assert [(e.source, e.name, e.field) for e in errors] == [
        (Source(path, 0), "ml", "spec.guarantee.resource[nvidia.com/gpu]"),
        (Source(path, 0), "ml", "spec.deserved[nvidia.com/gpu]"),
    ]
    assert "below the nvidia.com/gpu=120 its child queues add up to" in errors[1].message


# --- names, priority classes, configurations --------------------------------------------------------


def test_duplicate_names_of_one_kind_and_namespace(tmp_path: Path) -> None:
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: %s}\n"
    path, errors = check(tmp_path, queue("q"), queue("q"), pod % "a", pod % "b", pod % "a", podgroup("{}", name="q"))
    assert [(e.source.index, e.kind, e.name, e.field) for e in errors] == [
        (1, "Queue", "q", "metadata.name"),
        (4, "Pod", "p", "metadata.name"),
    ]
    assert errors[0].message == f"duplicate name: also defined in {path} document 0"


def test_priority_classes(tmp_path: Path) -> None:
    pc = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: %s}\nvalue: %d\nglobalDefault: %s\n"
    path, errors = check(tmp_path, pc % ("a", 1, "true"), pc % ("b", 2, "true"), pc % ("huge", 2_000_000_000, "false"))
    assert [(e.source, e.name, e.field) for e in errors] == [
        (Source(path, 1), "b", "globalDefault"),
        (Source(path, 2), "huge", "value"),
    ]
    assert check(tmp_path, pc % ("system-node", 2_000_000_000, "false"))[1] == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('actions: "enqueue, shuffle"', "actions"),
        ('spec: {actions: "allocate, teleport"}', "spec.actions"),
        ('conf: "actions: allocate, warp"', "conf.actions"),
        ("tiers: [{plugins: [{name: gang}]}, {plugins: [{name: drf}, {name: magic}]}]", "tiers[1].plugins[1].name"),
        ("spec: {conf: 'tiers: [{plugins: [{name: magic}]}]'}", "spec.conf.tiers[0].plugins[0].name"),
    ],
)
def test_unknown_actions_and_plugins(tmp_path: Path, body: str, field: str) -> None:
    path, errors = check(tmp_path, conf(body))
    assert "unknown" in the_error(errors, path, 0, "SchedulerConfiguration", "c", field).message


def test_every_known_action_and_plugin_is_accepted(tmp_path: Path) -> None:
    plugins = ", ".join(f"{{name: {name}}}" for name in KNOWN_PLUGINS)
    assert check(tmp_path, conf(f'actions: "{", ".join(KNOWN_ACTIONS)}"\ntiers: [{{plugins: [{plugins}]}}]'))[1] == []


def test_errors_are_ordered_by_file_and_document(tmp_path: Path) -> None:
    _, errors = check(
        tmp_path, queue("a", "{weight: 0}"), job(f"{{queue: x, tasks: [{TASK}]}}"), queue("b", "{weight: 0}")
    )
    assert [e.source.index for e in errors] == [0, 1, 2]
