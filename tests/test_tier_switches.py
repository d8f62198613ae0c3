"""Per-plugin switches in the tiers, as volcano-scheduler.conf writes them (`enableJobOrder: false` ...): read
and checked by the loader, and each one turning off that extension point of that plugin only, through the
session's merge of the plugins' registrations."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from scheduler_builders import Cluster, bound, conf, job, node, pending_reason, queue
from typer.testing import CliRunner

from tidegate.cli.main import app
from tidegate.model.manifests import load_text
from tidegate.model.objects import PLUGIN_SWITCHES, PluginOption, SchedulerConfiguration, Tier
from tidegate.model.validation import validate
from tidegate.scheduler.framework import IGNORED_SWITCHES, SWITCHED_POINTS, ExtensionPoints
from tidegate.scheduler.plugins import BUILTIN_PLUGINS, default_registry
from tidegate.scheduler.session import Session
from tidegate.scheduler.snapshot import Snapshot

CONF = """apiVersion: tidegate.io/v1alpha1
kind: SchedulerConfiguration
metadata: {{name: switched}}
actions: "enqueue, allocate"
tiers:
- plugins:
  - {{name: priority, {switch}}}
  - {{name: gang}}
- plugins: [{{name: predicates}}, {{name: proportion}}, {{name: nodeorder}}]
"""


def switched(config: SchedulerConfiguration, plugin: str, **switches: bool) -> SchedulerConfiguration:
    """The configuration with `plugin`'s tier entry setting these switches."""
    tiers = tuple(
        Tier(
            tuple(
                dataclasses.replace(option, switches={**option.switches, **switches})
                if option.name == plugin
                else option
                for option in tier.plugins
            )
        )
        for tier in config.tiers
    )
    return dataclasses.replace(config, tiers=tiers)


# -- reading them -----------------------------------------------------------------------------------------
def test_switches_are_read_with_volcano_s_spelling() -> None:
    ms = load_text(CONF.format(switch="enableJobOrder: false, enabledOverused: true"), "scheduler.yaml")
    assert ms.errors == []
    (configuration,) = ms.configurations
    priority = configuration.tiers[0].plugins[0]
    assert priority.switches == {"enableJobOrder": False, "enabledOverused": True}
    assert not priority.enabled("enableJobOrder") and priority.enabled("enableTaskOrder")
    assert not priority.enabled("enableHierarchy")  # off unless set, as Volcano's defaulting leaves it


@pytest.mark.parametrize(
    ("switch", "message"),
    [
        ("enableJobOrder: 'false'", "expected true or false, got 'false'"),
        ("enableJobOrder: 0", "expected true or false, got 0"),
        ("enableOverused: false", "unknown plugin option: Volcano spells it enabledOverused"),
        ("enabledJobOrder: false", "unknown plugin option: Volcano spells it enableJobOrder"),
        ("weight: 3", "unknown plugin option (a plugin takes name, arguments and Volcano's switches: enableJobOrder"),
    ],
)
def test_a_bad_switch_is_an_error_naming_file_document_and_field(switch: str, message: str) -> None:
    ms = load_text(CONF.format(switch=switch), "scheduler.yaml")
    (error,) = ms.errors
    key = switch.partition(":")[0]
    assert (error.source.file, error.source.index, error.kind) == ("scheduler.yaml", 0, "SchedulerConfiguration")
    assert error.field == f"tiers[0].plugins[0].{key}"
    assert error.message.startswith(message)


def test_drf_with_hierarchy_next_to_proportion_is_refused_as_volcano_refuses_it() -> None:
    text = CONF.format(switch="enableJobOrder: true").replace(
        "[{name: predicates}, {name: proportion}", "[{name: drf, enableHierarchy: true}, {name: proportion}"
    )
    (error,) = validate(load_text(text, "scheduler.yaml"))
    assert error.field == "tiers[1].plugins[0].enableHierarchy" and "conflict" in error.message
    apart = text.replace("{name: drf, enableHierarchy: true}, {name: proportion}", "{name: drf, enableHierarchy: true}")
    assert validate(load_text(apart + "- plugins: [{name: proportion}]\n", "scheduler.yaml")) == []


def test_validate_names_a_bad_switch_from_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_text(CONF.format(switch="enablePredicate: maybe"))
    result = CliRunner().invoke(app, ["validate", "-f", str(path)])
    assert result.exit_code == 1
    assert "SchedulerConfiguration/switched field tiers[0].plugins[0].enablePredicate: expected true or false" in (
        result.output
    )


def test_every_volcano_switch_is_implemented_or_ignored_with_a_reason() -> None:
    assert set(SWITCHED_POINTS) | set(IGNORED_SWITCHES) == set(PLUGIN_SWITCHES)
    assert not set(SWITCHED_POINTS) & set(IGNORED_SWITCHES)
    points = {f.name for f in dataclasses.fields(ExtensionPoints)}
    assert all(set(names) <= points for names in SWITCHED_POINTS.values())
    assert all(reason for reason in IGNORED_SWITCHES.values())


# -- the mechanism ----------------------------------------------------------------------------------------
def _registrations(option: PluginOption) -> ExtensionPoints:
    """What a session holds for a configuration of this one plugin."""
    config = SchedulerConfiguration(actions=(), tiers=(Tier((option,)),))
    snapshot = Snapshot([node("n0", gpus=2)], [queue("default")], [], [])
    return Session(snapshot, config, default_registry()).ext


@pytest.mark.parametrize("plugin", sorted(BUILTIN_PLUGINS))
@pytest.mark.parametrize("switch", sorted(SWITCHED_POINTS))
def test_a_switch_turns_off_its_points_of_the_plugin_and_nothing_else(plugin: str, switch: str) -> None:
    on, off = _registrations(PluginOption(plugin)), _registrations(PluginOption(plugin, switches={switch: False}))
    for point in (f.name for f in dataclasses.fields(ExtensionPoints)):
        before, after = getattr(on, point), getattr(off, point)
        if point in SWITCHED_POINTS[switch] and isinstance(before, list):
            assert after == [], f"{plugin} {switch}: {point} still registered"
        elif isinstance(before, list | dict | set):
            assert len(after) == len(before), f"{plugin} {switch}: {point} changed"
        else:
            assert (after is None) == (before is None), f"{plugin} {switch}: {point} changed"


def test_switching_one_plugin_leaves_another_s_same_point_alone() -> None:
    config = conf("allocate", "priority, gang", "drf, predicates, proportion")
    full = Session(Snapshot([], [], [], []), config, default_registry()).ext
    ext = Session(Snapshot([], [], [], []), switched(config, "priority", enableJobOrder=False), default_registry()).ext
    assert len(ext.job_order) == len(full.job_order) - 1 == 2  # gang's and drf's remain
    assert len(ext.task_order) == len(full.task_order) == 1


# -- what the switches change ------------------------------------------------------------------------------
BASE = conf("enqueue, allocate", "priority, gang", "predicates, proportion, nodeorder")


def test_priority_without_job_order_takes_jobs_by_creation_time() -> None:
    cluster = Cluster(
        nodes=[node("n0", gpus=1)],
        queues=[queue("default")],
        jobs=[
            job("old", requests={"nvidia.com/gpu": 1}, created=1.0),
            job("urgent", requests={"nvidia.com/gpu": 1}, priority=100, created=2.0),
        ],
    )
    assert bound(cluster.schedule(BASE)) == {"default/urgent-0": "n0"}
    assert bound(cluster.schedule(switched(BASE, "priority", enableJobOrder=False))) == {"default/old-0": "n0"}


def test_gang_without_job_ready_binds_part_of_a_gang() -> None:
    cluster = Cluster(
        nodes=[node("n0", gpus=2)],
        queues=[queue("default")],
        jobs=[job("gang", replicas=3, requests={"nvidia.com/gpu": 1})],
    )
    assert bound(cluster.schedule(BASE)) == {}
    partial = cluster.schedule(switched(BASE, "gang", enableJobReady=False))
    assert bound(partial) == {"default/gang-0": "n0", "default/gang-1": "n0"}


def test_predicates_without_predicate_ignore_node_selectors_but_never_over_commit() -> None:
    cluster = Cluster(
        nodes=[node("n0", gpus=1, labels={"zone": "b"})],
        queues=[queue("default")],
        jobs=[
            job("a", requests={"nvidia.com/gpu": 1}, node_selector={"zone": "a"}, created=1.0),
            job("b", requests={"nvidia.com/gpu": 1}, node_selector={"zone": "a"}, created=2.0),
        ],
    )
    decisions = cluster.schedule(BASE)
    assert bound(decisions) == {} and "nodeSelector mismatch" in pending_reason(decisions, "default/a")
    unfiltered = cluster.schedule(switched(BASE, "predicates", enablePredicate=False))
    assert bound(unfiltered) == {"default/a-0": "n0"}  # resources still decide: one GPU, one pod
    assert pending_reason(unfiltered, "default/b")


def test_nodeorder_without_node_order_scores_nothing() -> None:
    cluster = Cluster(
        nodes=[node("busy", cpu=8, gpus=2), node("idle", cpu=64, gpus=2)],
        queues=[queue("default")],
        jobs=[job("a", requests={"cpu": 1})],
    )
    assert bound(cluster.schedule(BASE)) == {"default/a-0": "idle"}  # least requested
    assert bound(cluster.schedule(switched(BASE, "nodeorder", enableNodeOrder=False))) == {"default/a-0": "busy"}


def test_proportion_without_allocatable_and_overused_lets_a_queue_past_its_capability() -> None:
    cluster = Cluster(
        nodes=[node("n0", gpus=4)],
        queues=[queue("capped", capability={"nvidia.com/gpu": 1})],
        jobs=[job("a", queue="capped", replicas=2, min_member=1, requests={"nvidia.com/gpu": 1})],
    )
    assert len(bound(cluster.schedule(BASE))) == 1
    assert len(bound(cluster.schedule(switched(BASE, "proportion", enabledAllocatable=False)))) == 1  # overused
    unchecked = switched(BASE, "proportion", enabledAllocatable=False, enabledOverused=False)
    assert len(bound(cluster.schedule(unchecked))) == 2


def test_ignored_switches_change_no_decision() -> None:
    cluster = Cluster(
        nodes=[node("n0", gpus=2), node("n1", gpus=2)],
        queues=[queue("default")],
        jobs=[job("a", replicas=3, requests={"nvidia.com/gpu": 1}), job("b", requests={"cpu": 2})],
    )
    off = {switch: False for switch in IGNORED_SWITCHES}
    config = BASE
    for plugin in ("priority", "gang", "predicates", "proportion", "nodeorder"):
        config = switched(config, plugin, **off)
    assert cluster.schedule(config) == cluster.schedule(BASE)


def test_tidegate_schedule_reads_the_switches_from_the_configuration(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(
        """apiVersion: v1
kind: Node
metadata: {name: n0, labels: {zone: b}}
status: {allocatable: {cpu: "8", memory: 64Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: picky}
spec:
  schedulerName: volcano
  nodeSelector: {zone: a}
  containers: [{name: main, resources: {requests: {cpu: "1"}}}]
"""
    )
    (tmp_path / "scheduler.yaml").write_text(CONF.format(switch="enableJobOrder: true"))
    runner = CliRunner()
    result = runner.invoke(app, ["schedule", "-f", str(tmp_path), "-o", "json"])
    assert result.exit_code == 0 and '"bindings": []' in result.output
    conf_file = tmp_path / "scheduler.yaml"
    off = conf_file.read_text().replace("{name: predicates}", "{name: predicates, enablePredicate: false}")
    conf_file.write_text(off)
    result = runner.invoke(app, ["schedule", "-f", str(tmp_path), "-o", "json"])
    assert result.exit_code == 0 and '"node": "n0"' in result.output
