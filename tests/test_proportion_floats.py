"""Proportion's quotas in Python floats against the numpy vector forms they replaced, bit for bit.

The water-fill and the admission check run on a handful of resource columns each cycle, so they are
written in Python numbers (numpy's per-call cost dwarfs the work). The references below are the
former numpy code, kept verbatim in spirit; random clusters, weights, capabilities, guarantees and
requests must give the very same floats and the same refusals.
"""

from __future__ import annotations

import random

import numpy as np
from scheduler_builders import PROPORTION, Cluster, job, nodes, queue

from tidegate.scheduler.info import QueueInfo
from tidegate.scheduler.node_table import BoolArray, FloatArray
from tidegate.scheduler.plugins import default_registry
from tidegate.scheduler.plugins.proportion import ProportionPlugin
from tidegate.scheduler.plugins.quota import as_float, capability_cap
from tidegate.scheduler.session import Session


def first_exceeded(used: FloatArray, limit: FloatArray, dims: BoolArray) -> int | None:
    """The first resource column among dims where used exceeds limit, or None (the vector form of the votes)."""
    over = np.flatnonzero(dims & (used > limit))
    return int(over[0]) if len(over) else None


def reference_real_capability(ssn: Session, q: QueueInfo) -> FloatArray:
    total = as_float(ssn.total)
    total_guarantee = sum((as_float(ssn.vector(o.queue.guarantee)) for o in ssn.queues.values()), np.zeros_like(total))
    guarantee = as_float(ssn.vector(q.queue.guarantee))
    real = np.maximum(total - total_guarantee, 0) + guarantee
    if q.queue.capability is not None:
        real = np.minimum(real, capability_cap(ssn.index, q.queue))
    return real


def reference_water_fill(ssn: Session, queues: list[QueueInfo]) -> dict[str, FloatArray]:
    dims = ssn.quota_mask
    total = as_float(ssn.total)
    real = {q.name: reference_real_capability(ssn, q) for q in queues}
    deserved = {q.name: np.zeros_like(total) for q in queues}
    remaining = total.copy()
    met: set[str] = set()
    while True:
        weight = sum(q.queue.weight for q in queues if q.name not in met)
        if weight == 0:
            break
        before = remaining.copy()
        increased = np.zeros_like(total)
        decreased = np.zeros_like(total)
        for q in queues:
            if q.name in met:
                continue
            old = deserved[q.name].copy()
            new = old + remaining * (q.queue.weight / weight)
            new = np.minimum(new, real[q.name])
            new = np.minimum(new, as_float(q.request))
            new = np.maximum(new, as_float(ssn.vector(q.queue.guarantee)))
            deserved[q.name] = new
            if (as_float(q.request)[dims] <= new[dims]).all() or np.array_equal(new, old):
                met.add(q.name)
            diff = new - old
            increased += np.maximum(diff, 0)
            decreased += np.maximum(-diff, 0)
        remaining = np.maximum(remaining + decreased - increased, 0)
        if not remaining[dims].any() or np.array_equal(remaining, before):
            break
    return deserved


def random_session(rng: random.Random) -> Session:
    names = [f"q{i}" for i in range(rng.randint(1, 5))]
    queues = []
    for name in names:
        capability = {"nvidia.com/gpu": rng.randint(0, 24)} if rng.random() < 0.4 else None
        if capability is not None and rng.random() < 0.5:
            capability["cpu"] = rng.randint(4, 200)
        guarantee = {"nvidia.com/gpu": rng.randint(0, 3), "cpu": rng.randint(0, 8)} if rng.random() < 0.3 else None
        queues.append(queue(name, weight=rng.randint(1, 7), capability=capability, guarantee=guarantee))
    jobs = [
        job(
            f"j{i}",
            rng.choice(names),
            replicas=rng.randint(1, 6),
            min_member=1,
            requests={
                "cpu": rng.choice([1, 3, 7, 0.5]),
                "memory": f"{rng.randint(1, 90)}Gi",
                "nvidia.com/gpu": rng.randint(0, 3),
            },
            min_resources={"cpu": rng.randint(0, 40), "nvidia.com/gpu": rng.randint(0, 12)},
        )
        for i in range(rng.randint(0, 12))
    ]
    cluster = Cluster(
        nodes=nodes("n", rng.randint(1, 6), cpu=rng.choice([16, 33, 96]), gpus=rng.choice([0, 4, 8])),
        queues=queues,
        jobs=jobs,
    )
    return Session(cluster.snapshot(), PROPORTION, default_registry())


def test_water_fill_and_admission_match_the_vector_forms() -> None:
    rng = random.Random(7)
    for _ in range(300):
        ssn = random_session(rng)
        plugin = next(p for p in ssn.plugins if isinstance(p, ProportionPlugin))
        active = [q for q in ssn.queues.values() if q.has_jobs or q.settled]
        expected = reference_water_fill(ssn, active)
        for q in ssn.queues.values():
            want = expected.get(q.name, np.zeros(len(ssn.index)))
            assert plugin.deserved_of(q).tobytes() == want.tobytes(), q.name
        for q in active:
            assert plugin.real_capability[q.name].tobytes() == reference_real_capability(ssn, q).tobytes()
            for j in q.jobs:
                used = as_float(j.min_resources + q.allocated + q.inqueue)
                dims = ssn.quota_mask & (j.min_resources > 0)
                refused = (
                    j.min_resources.any() and first_exceeded(used, plugin.real_capability[q.name], dims) is not None
                )
                assert (plugin._enqueueable(j) is not None) == bool(refused)
