"""Required pod affinity and anti-affinity in predicates, as Kubernetes' InterPodAffinity filter: label
selectors, namespaces and namespaceSelector, topology keys, the symmetric check of existing pods' anti-affinity,
gangs placed in one statement, the manifest fields checked; and the property that no two pods that anti-affine
each other end in one topology domain."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scheduler_builders import PROPORTION, Job, bound, conf, job, node, pending_reason

from tidegate.model.expand import workload_from
from tidegate.model.manifests import load_text
from tidegate.model.objects import (
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodGroupPhase,
    PodPhase,
)
from tidegate.scheduler.admission import admission_errors
from tidegate.scheduler.online import OnlineScheduler
from tidegate.scheduler.pod_affinity import make_term
from tidegate.scheduler.scheduler import schedule
from tidegate.scheduler.snapshot import Decisions, Snapshot

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def cluster(count: int = 4, zones: int = 2, cpu: int = 8) -> list[Node]:
    """Nodes n0.. with a hostname and a zone label (z0, z1, ... round robin)."""
    return [node(f"n{i}", cpu=cpu, labels={HOST: f"n{i}", ZONE: f"z{i % zones}"}) for i in range(count)]


def selects(**labels: str) -> LabelSelector:
    return LabelSelector(tuple(sorted(labels.items())))


def term(key: str = HOST, selector: LabelSelector | None = None, **kwargs: object) -> PodAffinityTerm:
    return PodAffinityTerm(selector, key, **kwargs)  # type: ignore[arg-type]


def gang(
    name: str,
    pods: int,
    labels: dict[str, str] | None = None,
    affinity: Sequence[PodAffinityTerm] = (),
    anti: Sequence[PodAffinityTerm] = (),
    namespace: str = "default",
    min_member: int | None = None,
    running_on: Sequence[str] = (),
) -> Job:
    made = job(
        name,
        "default",
        pods,
        {"cpu": 1},
        namespace=namespace,
        min_member=min_member,
        running_on=running_on,
        phase=PodGroupPhase.RUNNING if running_on else PodGroupPhase.PENDING,
    )
    for pod in made.pods:
        pod.labels = dict(labels or {})
        if affinity or anti:
            pod.pod_affinity = PodAffinity(tuple(affinity), tuple(anti))
    return made


def run(nodes: list[Node], *jobs: Job, namespaces: dict[str, dict[str, str]] | None = None) -> Decisions:
    snapshot = Snapshot(nodes, [], [j.group for j in jobs], [p for j in jobs for p in j.pods])
    snapshot.namespaces = namespaces or {}
    return schedule(snapshot, PROPORTION)


def nodes_of(decisions: Decisions, name: str) -> list[str]:
    return sorted(node for pod, node in bound(decisions).items() if pod.split("/")[1].rsplit("-", 1)[0] == name)


# -- anti-affinity ----------------------------------------------------------------------------------------
def test_a_gang_that_anti_affines_itself_spreads_one_pod_a_node() -> None:
    spread = gang("web", 4, {"app": "web"}, anti=[term(HOST, selects(app="web"))])
    assert nodes_of(run(cluster(4), spread), "web") == ["n0", "n1", "n2", "n3"]


def test_a_gang_with_more_pods_than_domains_places_none_and_its_discard_forgets_its_members() -> None:
    """Five pods, four hosts: the gang's statement is discarded, and the pods it had placed no longer repel
    anyone (a pod anti-affine to the gang's label goes where the gang's first pod was)."""
    spread = gang("a-web", 5, {"app": "web"}, anti=[term(HOST, selects(app="web"))])
    loner = gang("z-loner", 1, anti=[term(ZONE, selects(app="web"))])
    decisions = run(cluster(4, cpu=2), spread, loner)
    assert nodes_of(decisions, "a-web") == []
    assert "4 didn't match pod anti-affinity rules" in pending_reason(decisions, "default/a-web")
    assert nodes_of(decisions, "z-loner") == ["n0"]


def test_a_zone_anti_affinity_spreads_over_zones_and_leaves_the_rest_waiting() -> None:
    spread = gang("db", 3, {"app": "db"}, anti=[term(ZONE, selects(app="db"))], min_member=1)
    decisions = run(cluster(4, zones=2), spread)
    assert sorted(int(name[1:]) % 2 for name in nodes_of(decisions, "db")) == [0, 1]  # one pod in each zone


def test_an_existing_pod_s_anti_affinity_keeps_pods_it_selects_out_of_its_domain() -> None:
    """The symmetric check: the incoming pods have no terms of their own."""
    guard = gang("guard", 1, {"app": "guard"}, anti=[term(ZONE, selects(app="noisy"))], running_on=["n0"])
    noisy = gang("noisy", 6, {"app": "noisy"}, min_member=1)
    decisions = run(cluster(4, zones=2, cpu=2), guard, noisy)
    assert nodes_of(decisions, "noisy") == ["n1", "n1", "n3", "n3"]  # zone z1 only, though z0 has room for 3
    assert "didn't satisfy existing pods' anti-affinity rules" in pending_reason(decisions, "default/noisy")
    quiet = gang("quiet", 3, {"app": "quiet"}, min_member=1)
    assert len(nodes_of(run(cluster(4, zones=2, cpu=2), guard, noisy, quiet), "quiet")) == 3


def test_a_pending_pod_with_anti_affinity_placed_first_keeps_later_pods_it_selects_away() -> None:
    first = gang("a-first", 1, {"app": "a"}, anti=[term(HOST, selects(app="b"))])
    later = gang("b-later", 2, {"app": "b"}, min_member=1)
    decisions = run(cluster(2, cpu=4), first, later)
    (host,) = nodes_of(decisions, "a-first")
    assert host not in nodes_of(decisions, "b-later") and nodes_of(decisions, "b-later")


def test_nodes_without_the_topology_key_are_no_domain_for_anti_affinity() -> None:
    nodes = [*cluster(1), node("bare", cpu=8)]  # no hostname label: its pods repel no one there
    spread = gang("web", 3, {"app": "web"}, anti=[term(HOST, selects(app="web"))], min_member=1)
    assert nodes_of(run(nodes, spread), "web") == ["bare", "bare", "n0"]


def test_a_term_without_a_label_selector_selects_no_pod_and_an_empty_one_selects_every_pod() -> None:
    none = gang("none", 3, {"app": "x"}, anti=[term(HOST, None)])
    assert len(nodes_of(run(cluster(1), none), "none")) == 3
    every = gang("every", 2, {"app": "x"}, anti=[term(HOST, LabelSelector())], min_member=1)
    assert len(nodes_of(run(cluster(1), every), "every")) == 1


def test_match_expressions_select_as_kubernetes_reads_them() -> None:
    selector = LabelSelector(
        match_expressions=(
            LabelSelectorRequirement("tier", "In", ("a", "b")),
            LabelSelectorRequirement("canary", "DoesNotExist"),
        )
    )
    guard = gang("guard", 1, anti=[term(HOST, selector)], running_on=["n0"])
    ins = gang("in", 1, {"tier": "a"})
    canary = gang("canary", 1, {"tier": "a", "canary": "1"})
    other = gang("other", 1, {"tier": "c"})
    unlabelled = gang("unlabelled", 1)
    decisions = run(cluster(1), guard, ins, canary, other, unlabelled)
    assert nodes_of(decisions, "in") == []  # tier a, no canary label: selected
    assert nodes_of(decisions, "canary") == nodes_of(decisions, "other") == nodes_of(decisions, "unlabelled") == ["n0"]


# -- namespaces -------------------------------------------------------------------------------------------
def test_a_term_selects_pods_of_its_own_namespace_unless_it_names_others_or_a_namespace_selector() -> None:
    def guarded(**kwargs: object) -> Decisions:
        guard = gang("guard", 1, anti=[term(HOST, selects(app="web"), **kwargs)], running_on=["n0"])
        other = gang("web", 1, {"app": "web"}, namespace="team-b")
        return run(
            cluster(1, cpu=8), guard, other, namespaces={"team-b": {"kubernetes.io/metadata.name": "team-b", "t": "b"}}
        )

    assert nodes_of(guarded(), "web") == ["n0"]  # the guard's own namespace (default) only
    assert nodes_of(guarded(namespaces=("team-b",)), "web") == []
    assert nodes_of(guarded(namespace_selector=LabelSelector()), "web") == []  # {}: every namespace
    assert nodes_of(guarded(namespace_selector=selects(t="b")), "web") == []
    assert nodes_of(guarded(namespace_selector=selects(t="c")), "web") == ["n0"]


def test_a_namespace_without_a_namespace_object_has_its_name_label() -> None:
    by_name = selects(**{"kubernetes.io/metadata.name": "team-b"})
    guard = gang("guard", 1, anti=[term(HOST, selects(app="web"), namespace_selector=by_name)], running_on=["n0"])
    other = gang("web", 1, {"app": "web"}, namespace="team-b")
    assert nodes_of(run(cluster(1), guard, other), "web") == []


def test_match_label_keys_add_the_pod_s_own_label_values() -> None:
    pod = Pod("p", labels={"app": "web", "rev": "2"})
    made = make_term(
        PodAffinityTerm(selects(app="web"), HOST, match_label_keys=("rev",), mismatch_label_keys=("app",)), pod
    )
    assert made.selector is not None
    assert made.selector.matches({"app": "web", "rev": "2"}) is False  # app NotIn (web) wins
    made = make_term(PodAffinityTerm(selects(app="web"), HOST, match_label_keys=("rev",)), pod)
    assert made.selector is not None
    assert made.selector.matches({"app": "web", "rev": "2"}) and not made.selector.matches({"app": "web", "rev": "1"})


# -- affinity ---------------------------------------------------------------------------------------------
def test_pods_that_want_company_go_to_the_domain_of_the_pods_they_select() -> None:
    db = gang("db", 1, {"app": "db"}, running_on=["n1"])
    web = gang("web", 6, affinity=[term(ZONE, selects(app="db"))], min_member=1)
    placed = nodes_of(run(cluster(4, zones=2, cpu=2), db, web), "web")
    assert placed == ["n1", "n3", "n3"]  # zone z1 (n1 and n3), with the room left there


def test_without_the_pods_it_wants_a_pod_waits_and_says_why() -> None:
    web = gang("web", 1, affinity=[term(ZONE, selects(app="db"))])
    decisions = run(cluster(2), web)
    assert nodes_of(decisions, "web") == []
    assert "didn't match pod affinity rules" in pending_reason(decisions, "default/web")


def test_the_first_of_a_gang_that_wants_to_be_together_goes_anywhere_and_the_rest_follow() -> None:
    together = gang("train", 4, {"app": "train"}, affinity=[term(ZONE, selects(app="train"))])
    zones = {node for node in nodes_of(run(cluster(4, zones=2, cpu=2), together), "train")}
    assert zones in ({"n0", "n2"}, {"n1", "n3"})  # one zone: two nodes of two CPUs


def test_a_node_without_the_affinity_s_topology_key_never_takes_the_pod() -> None:
    nodes = [node("bare", cpu=8), *cluster(1)]
    together = gang("train", 2, {"app": "train"}, affinity=[term(ZONE, selects(app="train"))])
    assert nodes_of(run(nodes, together), "train") == ["n0", "n0"]


# -- the scheduler around it ------------------------------------------------------------------------------
def test_pods_without_pod_affinity_in_a_session_without_any_look_at_nothing() -> None:
    from tidegate.scheduler.plugins import default_registry
    from tidegate.scheduler.session import Session

    plain = gang("plain", 2)
    ssn = Session(Snapshot(cluster(2), [], [plain.group], plain.pods), PROPORTION, default_registry())
    assert ssn.affinity_tasks == 0 and ssn.ext.placement_filters == []


def test_the_podaffinityenable_argument_turns_it_off_and_must_be_a_boolean() -> None:
    config = conf(
        "enqueue, allocate",
        "priority, gang",
        "predicates, proportion",
        predicates={"predicate.PodAffinityEnable": False},
    )
    spread = gang("web", 3, {"app": "web"}, anti=[term(HOST, selects(app="web"))])
    snapshot = Snapshot(cluster(1), [], [spread.group], spread.pods)
    assert len(bound(schedule(snapshot, config))) == 3
    text = """
apiVersion: tidegate.io/v1alpha1
kind: SchedulerConfiguration
metadata: {name: c}
tiers: [{plugins: [{name: predicates, arguments: {predicate.PodAffinityEnable: "no"}}]}]
"""
    (error,) = admission_errors(load_text(text, "c.yaml"))
    assert error.field == "tiers[0].plugins[0].arguments.predicate.PodAffinityEnable"


def test_an_online_scheduler_counts_pods_that_left_no_more_and_pods_that_arrive_bound() -> None:
    online = OnlineScheduler(cluster(2), [], PROPORTION)
    first = gang("web-a", 2, {"app": "web"}, anti=[term(HOST, selects(app="web"))])
    online.add_group(first.group, first.pods)
    assert len(bound(online.cycle(1.0))) == 2
    blocked = gang("web-b", 1, {"app": "web"}, anti=[term(HOST, selects(app="web"))])
    online.add_group(blocked.group, blocked.pods)
    assert bound(online.cycle(2.0)) == {}
    online.remove_group(first.group.key)
    assert len(bound(online.cycle(3.0))) == 1
    guard = gang("guard", 1, anti=[term(ZONE, selects(app="late"))], running_on=["n0"])
    online.add_group(guard.group, guard.pods)  # arrives bound: counted at once
    late = gang("late", 2, {"app": "late"}, min_member=1)
    online.add_group(late.group, late.pods)
    placed = bound(online.cycle(4.0))
    assert all(node == "n1" for pod, node in placed.items() if "late" in pod) and placed


def test_a_job_waiting_for_company_is_placed_the_cycle_after_its_company_arrives() -> None:
    online = OnlineScheduler(cluster(2), [], PROPORTION)
    web = gang("a-web", 1, affinity=[term(ZONE, selects(app="db"))])
    online.add_group(web.group, web.pods)
    assert bound(online.cycle(1.0)) == {}
    db = gang("db", 1, {"app": "db"})
    online.add_group(db.group, db.pods)
    assert list(bound(online.cycle(2.0))) == ["default/db-0"]  # a-web goes first in job order: it waits again
    assert list(bound(online.cycle(3.0))) == ["default/a-web-0"]


# -- manifests --------------------------------------------------------------------------------------------
POD = """
apiVersion: v1
kind: Pod
metadata: {{name: p, labels: {{app: web}}}}
spec:
  containers: [{{name: c}}]
  affinity:
    {kind}:
      requiredDuringSchedulingIgnoredDuringExecution:
      - {term}
"""


def test_the_loader_keeps_required_terms_and_the_vcjob_s_pods_carry_them() -> None:
    text = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j}
spec:
  minAvailable: 2
  tasks:
  - name: w
    replicas: 2
    template:
      metadata: {labels: {app: w}}
      spec:
        containers: [{name: c}]
        affinity:
          podAntiAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector: {matchExpressions: [{key: app, operator: In, values: [w]}]}
              topologyKey: kubernetes.io/hostname
              namespaces: [default, other]
              namespaceSelector: {matchLabels: {team: a}}
          podAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
            - {labelSelector: {matchLabels: {app: db}}, topologyKey: topology.kubernetes.io/zone}
"""
    ms = load_text(text, "job.yaml")
    assert ms.errors == []
    pods = workload_from(ms).pods
    assert len(pods) == 2
    for pod in pods:
        assert pod.pod_affinity is not None
        (anti,) = pod.pod_affinity.anti_affinity
        assert anti.topology_key == HOST and anti.namespaces == ("default", "other")
        assert anti.namespace_selector == selects(team="a")
        assert anti.label_selector == LabelSelector((), (LabelSelectorRequirement("app", "In", ("w",)),))
        assert pod.pod_affinity.affinity[0].label_selector == selects(app="db")


@pytest.mark.parametrize(
    ("kind", "written", "field", "message"),
    [
        ("podAntiAffinity", "{labelSelector: {matchLabels: {app: web}}}", "[0].topologyKey", "is required"),
        ("podAffinity", "{topologyKey: 'a b', labelSelector: {}}", "[0].topologyKey", "not a label key"),
        (
            "podAntiAffinity",
            "{topologyKey: z, labelSelector: {matchExpressions: [{key: app, operator: Gt, values: ['1']}]}}",
            "[0].labelSelector.matchExpressions[0].operator",
            "not one of In, NotIn, Exists, DoesNotExist",
        ),
        (
            "podAntiAffinity",
            "{topologyKey: z, labelSelector: {matchExpressions: [{key: app, operator: In}]}}",
            "[0].labelSelector.matchExpressions[0].values",
            "needs at least one value",
        ),
        (
            "podAffinity",
            "{topologyKey: z, labelSelector: {matchLabels: {app: 'a b'}}}",
            "[0].labelSelector.matchLabels.app",
            "not a label value",
        ),
        ("podAffinity", "{topologyKey: z, matchLabelKeys: [rev]}", "[0].matchLabelKeys", "needs a labelSelector"),
        ("podAffinity", "{topologyKey: z, labelSelector: {}, namespaces: [A]}", "[0].namespaces[0]", "namespace"),
    ],
)
def test_bad_terms_are_errors_naming_the_field(kind: str, written: str, field: str, message: str) -> None:
    ms = load_text(POD.format(kind=kind, term=written), "pod.yaml")
    assert [e.field for e in ms.errors] == [
        f"spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution{field}"
    ]
    assert message in ms.errors[0].message


def test_preferred_terms_are_warned_about_not_scheduled_on() -> None:
    text = POD.format(kind="podAntiAffinity", term="{topologyKey: z, labelSelector: {}}").replace(
        "requiredDuringSchedulingIgnoredDuringExecution:\n      - {topologyKey: z, labelSelector: {}}",
        "preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, podAffinityTerm: {topologyKey: z}}]",
    )
    ms = load_text(text, "pod.yaml")
    assert ms.errors == [] and ms.pods[0].pod_affinity is None
    assert [w.field for w in ms.warnings] == [
        "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    ]


def test_namespace_objects_give_their_labels_and_tidegate_schedule_reads_them() -> None:
    ms = load_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a, labels: {team: a}}\n", "ns.yaml")
    assert [(n.name, n.labels) for n in ms.namespaces] == [
        ("team-a", {"team": "a", "kubernetes.io/metadata.name": "team-a"})
    ]


# -- the property ------------------------------------------------------------------------------------------
APPS = ("a", "b", "c")
KEYS = (HOST, ZONE, "rack")
pod_kinds = st.tuples(
    st.sampled_from(APPS),  # its app label
    st.lists(st.tuples(st.sampled_from(APPS), st.sampled_from(KEYS)), max_size=2),  # anti-affinity: (app, key)
    st.integers(1, 3),  # pods
    st.integers(1, 3),  # minMember, at most the pods
)


def anti_affine(first: Pod, second: Pod) -> set[str]:
    """The topology keys on which one of the two pods' anti-affinity terms selects the other."""
    keys = set()
    for one, other in ((first, second), (second, first)):
        for made in (make_term(t, one) for t in (one.pod_affinity.anti_affinity if one.pod_affinity else ())):
            if made.selects(other, {}):
                keys.add(made.topology_key)
    return keys


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(2, 6),
    st.integers(1, 3),
    st.integers(1, 2),
    st.lists(pod_kinds, min_size=1, max_size=8),
    st.lists(pod_kinds, max_size=6),
)
def test_no_two_pods_that_anti_affine_each_other_end_in_one_topology_domain(
    hosts: int,
    zones: int,
    racks: int,
    first: list[tuple[str, list[tuple[str, str]], int, int]],
    then: list[tuple[str, list[tuple[str, str]], int, int]],
) -> None:
    """Two passes: the first's placements run (and repel) in the second, whose gangs also come with theirs."""
    nodes = [
        node(
            f"n{i}",
            cpu=2,
            labels={HOST: f"n{i}", ZONE: f"z{i % zones}", **({"rack": f"r{i % racks}"} if i % 3 else {})},
        )
        for i in range(hosts)
    ]  # every third node has no rack label

    def jobs(kinds: list[tuple[str, list[tuple[str, str]], int, int]], prefix: str) -> list[Job]:
        out = []
        for i, (app, terms, pods, least) in enumerate(kinds):
            anti = [term(key, selects(app=target)) for target, key in terms]
            out.append(gang(f"{prefix}{i}", pods, {"app": app}, anti=anti, min_member=min(least, pods)))
        return out

    placed: dict[str, Pod] = {}
    earlier = jobs(first, "f")
    decisions = run(nodes, *earlier)
    for made in earlier:
        for pod in made.pods:
            host = bound(decisions).get(pod.key)
            if host:
                pod.node_name, pod.phase = host, PodPhase.RUNNING
                made.group.phase = PodGroupPhase.RUNNING
                placed[pod.key] = pod
    later = jobs(then, "s")
    decisions = run(nodes, *earlier, *later)
    for made in later:
        for pod in made.pods:
            host = bound(decisions).get(pod.key)
            if host:
                placed[pod.key] = dataclasses.replace(pod, node_name=host)
    labels = {n.name: n.labels for n in nodes}
    pods = list(placed.values())
    for i, one in enumerate(pods):
        for other in pods[i + 1 :]:
            for key in anti_affine(one, other):
                here, there = labels[one.node_name].get(key), labels[other.node_name].get(key)
                assert here is None or here != there, (one.key, other.key, key, here)


def test_a_pod_its_terms_keep_out_says_nothing_of_a_pod_of_the_same_job_without_them() -> None:
    """Pods alike but for their terms are other shapes: one failing does not skip the other."""
    blocker = gang("blocker", 1, {"app": "blocker"}, running_on=["n0"])
    mixed = gang("mixed", 2, min_member=1)
    mixed.pods[0].pod_affinity = PodAffinity(anti_affinity=(term(HOST, selects(app="blocker")),))
    assert bound(run(cluster(1), blocker, mixed)) == {"default/mixed-1": "n0"}
