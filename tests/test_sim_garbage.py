"""A simulation run makes no cyclic garbage: what it drops, reference counting frees (events and link
transfers let go of their callbacks once spent, a removed job of the tasks its last turn tried). So the run
keeps Python's cyclic collector paused (`Simulation.run`): its passes walked every object the run keeps alive
and found nothing to free. A reference cycle added to the run's objects makes this fail, rather than the
memory of a long run grow unseen."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from tidegate.sim.loader import SimulationInput, load_simulation
from tidegate.sim.run import build_simulation

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
DAYS = 8


def first_days(folders: list[str], name: str) -> SimulationInput:
    inp = load_simulation([str(EXAMPLES / folder) for folder in folders])
    inp.simulations[name] = inp.simulations[name].model_copy(update={"until_seconds": DAYS * 86400.0})
    return inp


@pytest.mark.parametrize(
    ("folders", "name", "scenario"),
    [
        (["hybrid-idc"], "hybrid-idc", "burst-budget"),
        # spot notices, link cuts that fail pods, data gravity's fetches and checkpoints, the budget
        (["hybrid-idc", "hybrid-idc-mechanisms"], "hybrid-idc-mechanisms", "cuts-fail-pods"),
        (["hybrid-idc", "hybrid-idc-mechanisms"], "hybrid-idc-mechanisms", "stressed-spot"),
    ],
)
def test_a_run_leaves_no_cyclic_garbage(folders: list[str], name: str, scenario: str) -> None:
    sim, _ = build_simulation(first_days(folders, name), name, scenario)
    while gc.collect():  # what earlier tests left (objects with finalizers take a second pass)
        pass
    gc.disable()  # no pass after the run may free what it left before it is counted
    try:
        sim.run()
        left = gc.collect()
    finally:
        gc.enable()
    assert any(job.started is not None for job in sim.outcome().jobs)
    assert left == 0


def test_the_collector_is_paused_while_a_run_goes_and_given_back() -> None:
    seen: list[bool] = []
    inp = first_days(["hybrid-idc"], "hybrid-idc")
    sim, _ = build_simulation(inp, "hybrid-idc", "elastic-burst", on_progress=lambda *_: seen.append(gc.isenabled()))
    assert gc.isenabled()
    sim.run()
    assert seen and not any(seen)
    assert gc.isenabled()
