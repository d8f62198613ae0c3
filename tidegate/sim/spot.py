"""Spot interruptions: how often a spot pool's nodes are interrupted, with how much notice, and what a
pod's preStop checkpoint saves before the instance dies.

Rates. AWS's Spot Instance Advisor gives each instance type an interruption band: the share of its
instances AWS interrupted over the trailing month (`<5%`, `5-10%`, `10-15%`, `15-20%`, `>20%`). We read
a band as the probability `p` that an instance running the whole month (730 hours) is interrupted, take
the band's midpoint (2.5%, 7.5%, 12.5%, 17.5%; 25% for `>20%`), and model interruptions as a Poisson
process per node: `1 - exp(-rate * 730) = p`, so `rate = -ln(1 - p) / 730` per instance-hour
(10-15% gives 1.83e-4 an hour, one interruption in about 5,470 node-hours). Instances that live for
hours rather than a month would see a higher rate if the band counted them alike; `ratePerHour` on the
pool overrides the default for such what-ifs.

Notice. AWS gives 120 s (the two-minute warning), GCP 30 s (Spot VMs), Azure 30 s (Scheduled Events'
minimum for Spot eviction); Alibaba Cloud sends its preemptible-instance interruption event about five
minutes before release, so aliyun is 300 s.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from tidegate.fleet.spec import ClusterSpec, NodePoolSpec, notice_seconds

HOURS_PER_MONTH = 730.0
#: The share of instances interrupted in a month each Spot Advisor band stands for (its midpoint).
BAND_FRACTION = {"<5%": 0.025, "5-10%": 0.075, "10-15%": 0.125, "15-20%": 0.175, ">20%": 0.25}
#: Where the Spot Advisor snapshot lives next to the repository (../shared/data, as for the traces).
DEFAULT_ADVISOR = (
    Path(__file__).resolve().parents[3] / "shared" / "data" / "aws-spot-advisor" / "spot-advisor-data.json"
)


class InterruptionError(ValueError):
    """A pool's interruption settings cannot be resolved; `field` names the manifest field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class Interruptions:
    """A spot pool's resolved interruption model."""

    rate_per_hour: float
    notice_s: float
    provider: str
    #: Explicit notice instants (simulated seconds); when given, nothing is drawn at random.
    at_seconds: tuple[float, ...] = ()
    #: Where the rate comes from, for the report.
    origin: str = ""

    def draw_notice(self, now: float, rng: np.random.Generator) -> float | None:
        """When a node that is ready at `now` gets its notice (exponential inter-arrival), or None."""
        if self.at_seconds or self.rate_per_hour <= 0:
            return None
        return now + float(rng.exponential(3600.0 / self.rate_per_hour))


def rate_from_band(fraction: float) -> float:
    """Interruptions per instance-hour for a share of instances interrupted over a 730-hour month."""
    return -math.log1p(-fraction) / HOURS_PER_MONTH


@lru_cache(maxsize=4)
def _advisor(path: str) -> dict[str, object]:
    data: dict[str, object] = json.loads(Path(path).read_text())
    return data


def advisor_band(path: Path, region: str, instance_type: str) -> str:
    """The interruption band label (e.g. "10-15%") of an instance type in a region."""
    if not path.is_file():
        raise InterruptionError("spec.interruption.advisorData", f"Spot Advisor data not found at {path}")
    data = _advisor(str(path))
    regions = data.get("spot_advisor", {})
    assert isinstance(regions, dict)
    if region not in regions:
        raise InterruptionError("spec.interruption.region", f"region {region!r} is not in the Spot Advisor data")
    entry = regions[region].get("Linux", {}).get(instance_type)
    if entry is None:
        raise InterruptionError(
            "spec.interruption.instanceType", f"{instance_type!r} has no Spot Advisor entry in {region}"
        )
    ranges = data.get("ranges", [])
    assert isinstance(ranges, list)
    return str(next(r["label"] for r in ranges if r["index"] == entry["r"]))


def resolve_interruptions(pool: NodePoolSpec, cluster: ClusterSpec, base: Path) -> Interruptions | None:
    """The pool's interruption model, defaults filled in; None if its nodes are never interrupted
    (not a spot pool, or a spot pool that declares no interruption)."""
    spec = pool.interruption
    if spec is None:
        return None
    if pool.pricing.model != "spot":
        raise InterruptionError(
            "spec.interruption", f"only spot pools are interrupted (pricing.model is {pool.pricing.model})"
        )
    provider = spec.provider or cluster.provider
    notice = notice_seconds(pool, cluster)
    if notice is None:
        raise InterruptionError(
            "spec.interruption.noticeSeconds",
            f"provider {provider!r} has no default notice: set noticeSeconds or provider (aws, gcp, azure, aliyun)",
        )
    if spec.rate_per_hour is not None:
        rate, origin = spec.rate_per_hour, f"ratePerHour {spec.rate_per_hour:g}"
    elif spec.instance_type:
        data = base / spec.advisor_data if spec.advisor_data else DEFAULT_ADVISOR
        band = advisor_band(data, spec.region, spec.instance_type)
        rate = rate_from_band(BAND_FRACTION[band])
        origin = f"{spec.instance_type} in {spec.region}: Spot Advisor band {band} a month -> {rate:.3g} per node-hour"
    elif spec.at_seconds:
        rate, origin = 0.0, "explicit notice times"
    else:
        raise InterruptionError("spec.interruption", "give ratePerHour, instanceType (Spot Advisor band) or atSeconds")
    return Interruptions(rate, float(notice), provider, tuple(sorted(spec.at_seconds)), origin)


@dataclass(frozen=True, slots=True)
class PreStop:
    """What a pod's preStop checkpoint does on a notice: whether it completes, and how long the pod
    holds its GPUs after the notice (until the checkpoint ends, the grace period runs out or the
    instance dies, whichever is first)."""

    saved: bool
    hold_s: float


def prestop(checkpoint_s: float, grace_s: float, notice_s: float) -> PreStop:
    """A checkpoint of `checkpoint_s` completes only within the grace period and before the instance
    dies at the end of the notice; otherwise the pod is killed at the earlier of the two. No checkpoint
    time (0) means the job has no preStop checkpoint: nothing is saved and the pod stops at once."""
    limit = min(grace_s, notice_s)
    if checkpoint_s <= 0:
        return PreStop(False, 0.0)
    if checkpoint_s <= limit:
        return PreStop(True, checkpoint_s)
    return PreStop(False, limit)


def grace_warning(grace_s: float, template: str, pool: str, interruptions: Interruptions) -> str:
    """The warning for a grace period the instance will not wait for ("" when it fits the notice)."""
    if grace_s <= interruptions.notice_s:
        return ""
    return (
        f"Job {template}: terminationGracePeriodSeconds {grace_s:g} is longer than NodePool {pool}'s "
        f"{interruptions.provider} spot notice ({interruptions.notice_s:g} s): the instance dies first, "
        f"so a preStop checkpoint gets at most {interruptions.notice_s:g} s"
    )
