"""The sweep's pure parts on hand-made figures: targets, the cheapest point meeting them, Pareto fronts,
monthly cost, and how points are drawn (grid, random, Latin hypercube)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.model.errors import Source
from tidegate.sweep.analysis import MONTH_HOURS, cheapest, known_metrics, pareto_front, parse_target, row
from tidegate.sweep.grid import parse_sweep, points, short_name
from tidegate.sweep.patch import PathError, apply, resolve

KNOWN = known_metrics(["dev", "prod"])


def test_targets_parse_and_compare() -> None:
    target = parse_target(" wait_p95 <= 900 ", KNOWN)
    assert (target.metric, target.op, target.value) == ("wait_p95", "<=", 900.0)
    assert target.met({"wait_p95": 900}) and not target.met({"wait_p95": 900.1})
    assert not target.met({})  # a point without the figure does not meet it
    assert parse_target("wait_p95.dev<1.5e3", KNOWN).value == 1500.0
    assert parse_target("local_gpu_utilization>=0.6", KNOWN).met({"local_gpu_utilization": 0.61})
    with pytest.raises(ValueError, match="write metric<=value"):
        parse_target("wait_p95 about 900", KNOWN)
    with pytest.raises(ValueError, match=r"unknown metric 'p95'; the metrics are monthly_cost, .*wait_p95\.prod"):
        parse_target("p95<=900", KNOWN)


def test_the_cheapest_point_meeting_every_target() -> None:
    rows: list[dict[str, Any]] = [
        {"monthly_cost": 100, "wait_p95": 5000, "queued_gpu_hours": 10},
        {"monthly_cost": 300, "wait_p95": 600, "queued_gpu_hours": 50},
        {"monthly_cost": 200, "wait_p95": 800, "queued_gpu_hours": 90},
        {"monthly_cost": 200, "wait_p95": 700, "queued_gpu_hours": 95},
    ]
    assert cheapest(rows, [parse_target("wait_p95<=900", KNOWN)]) == 3  # tie on cost: the lower wait
    both = [parse_target("wait_p95<=900", KNOWN), parse_target("queued_gpu_hours<=60", KNOWN)]
    assert cheapest(rows, both) == 1
    assert cheapest(rows, [parse_target("wait_p95<100", KNOWN)]) is None
    assert cheapest(rows, []) == 0


def test_pareto_front_on_hand_made_figures() -> None:
    rows: list[dict[str, Any]] = [
        {"monthly_cost": 100, "wait_p95": 5000},  # cheapest: on the front
        {"monthly_cost": 200, "wait_p95": 800},  # on the front
        {"monthly_cost": 250, "wait_p95": 800},  # as slow, dearer: beaten by the one above
        {"monthly_cost": 300, "wait_p95": 100},  # fastest: on the front
        {"monthly_cost": 400, "wait_p95": 900},  # beaten
        {"monthly_cost": 300, "wait_p95": 100},  # the same figures as another front point: both stay
        {"status": "failed"},
    ]
    assert pareto_front(rows, "monthly_cost", "wait_p95") == [0, 1, 3, 5]


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=30))
def test_the_front_is_exactly_the_points_no_other_beats(pairs: list[tuple[int, int]]) -> None:
    rows = [{"c": c, "w": w} for c, w in pairs]
    front = set(pareto_front(rows, "c", "w"))

    def beats(a: tuple[int, int], b: tuple[int, int]) -> bool:
        return a[0] <= b[0] and a[1] <= b[1] and a != b

    for i, p in enumerate(pairs):
        assert (i in front) == (not any(beats(q, p) for q in pairs))
    # the cheapest point with the lowest wait among the cheapest is always there
    assert min(range(len(pairs)), key=lambda i: pairs[i]) in front


def test_monthly_cost_counts_owned_gpus_and_the_cloud_bill_by_730_hours() -> None:
    summary = {
        "cloud_cost": 720.0,
        "wait_p50_s": 1.0,
        "wait_p95_s": 600.0,
        "queues": {"dev": {"wait_p50_s": 2.0, "wait_p95_s": 700.0, "jobs": 3}},
    } | {
        name: 0
        for name in (
            "local_gpu_utilization",
            "queued_gpu_hours",
            "cloud_gpu_hours",
            "cloud_peak_nodes",
            "jobs_completed",
            "jobs_unfinished",
            "jobs_failed",
            "jobs_overflowed",
            "restarts",
            "lost_gpu_hours",
            "spot_interruptions",
            "data_idle_gpu_hours",
            "simulated_days",
        )
    }
    figures = row(summary, idc_gpus=16, run_seconds=720 * 3600, idc_gpu_month_price=850)
    assert figures["idc_monthly_cost"] == 16 * 850
    assert figures["cloud_monthly_cost"] == 720.0 * MONTH_HOURS / 720
    assert figures["monthly_cost"] == 16 * 850 + 730
    assert (figures["wait_p95"], figures["wait_p95.dev"], figures["wait_p50.dev"]) == (600.0, 700.0, 2.0)


def sweep(spec: dict[str, Any]) -> Any:
    parsed, errors = parse_sweep({"kind": "Sweep", "metadata": {"name": "s"}, "spec": spec}, Source("g.yaml"))
    assert errors == []
    return parsed


def test_a_grid_is_the_product_in_order_and_fields_that_move_together_step_together() -> None:
    parsed = sweep(
        {
            "parameters": {
                "NodePool/a.spec.count": {"min": 1, "max": 3, "step": 1},
                "pair": {"label": ["small", "big"], "HPA/h.spec.maxReplicas": [2, 8], "Queue/q.spec.x": ["16", "64"]},
            }
        }
    )
    got = points(parsed)
    assert [p.shown for p in got[:3]] == [
        {"NodePool/a.spec.count": 1, "pair": "small"},
        {"NodePool/a.spec.count": 1, "pair": "big"},
        {"NodePool/a.spec.count": 2, "pair": "small"},
    ]
    assert len(got) == 6
    assert got[1].patches == (("NodePool/a.spec.count", 1), ("HPA/h.spec.maxReplicas", 8), ("Queue/q.spec.x", "64"))
    assert short_name("HorizontalPodAutoscaler/cloud-burst-hpa.spec.maxReplicas") == "cloud-burst-hpa maxReplicas"


def test_a_latin_hypercube_takes_each_stratum_once_and_a_seed_repeats_it() -> None:
    spec = {
        "sample": "latin-hypercube",
        "points": 10,
        "seed": 3,
        "parameters": {"A/a.spec.x": {"min": 0.0, "max": 1.0}, "A/a.spec.n": {"min": 0, "max": 9}},
    }
    got = points(sweep(spec))
    xs = sorted(p.patches[0][1] for p in got)
    assert [int(x * 10) for x in xs] == list(range(10))  # one point in each tenth
    assert sorted(p.patches[1][1] for p in got) == list(range(10))  # integers 0..9, each once
    assert [p.patches for p in points(sweep(spec))] == [p.patches for p in got]
    other = points(sweep(spec | {"seed": 4}))
    assert [p.patches for p in other] != [p.patches for p in got]
    rand = points(sweep(spec | {"sample": "random"}))
    assert len(rand) == 10 and all(0.0 <= p.patches[0][1] <= 1.0 for p in rand)


def test_sweep_spec_errors_name_their_field() -> None:
    _, errors = parse_sweep(
        {"metadata": {"name": "s"}, "spec": {"sample": "sobol", "parameters": {"A/a.spec.x": 3}, "extra": 1}},
        Source("g.yaml"),
    )
    fields = [e.field for e in errors]
    assert fields == ["spec.extra", "spec.sample", "spec.parameters[A/a.spec.x]"]
    _, errors = parse_sweep({"metadata": {"name": "s"}, "spec": {"sample": "random", "parameters": {}}}, Source("g"))
    assert [e.field for e in errors] == ["spec.points", "spec.parameters"]


def test_paths_with_dotted_names_and_keys_resolve_and_patch_copies() -> None:
    doc = {
        "kind": "Queue",
        "metadata": {"name": "team.a"},
        "spec": {"capability": {"nvidia.com/gpu": "8"}, "list": [{"x": 1}]},
    }
    docs: list[tuple[Source, object]] = [(Source("q.yaml"), doc)]
    path = resolve("Queue/team.a.spec.capability[nvidia.com/gpu]", docs)
    assert path.keys == ("spec", "capability", "nvidia.com/gpu")
    listed = resolve("Queue/team.a.spec.list[0].x", docs)
    patched = apply(docs, [(path, "16"), (listed, 2)])
    assert patched[0][1] == {**doc, "spec": {"capability": {"nvidia.com/gpu": "16"}, "list": [{"x": 2}]}}
    assert doc["spec"]["capability"] == {"nvidia.com/gpu": "8"}  # the original is untouched
    with pytest.raises(PathError, match=r"Queue/team\.a\.spec\.list is a list: give an index"):
        resolve("Queue/team.a.spec.list.x", docs)
    with pytest.raises(PathError, match=r"is a value \('8'\)"):
        resolve("Queue/team.a.spec.capability[nvidia.com/gpu].x", docs)
