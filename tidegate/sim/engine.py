"""The discrete-event simulation of one scenario: arrivals, scheduling cycles, job completions, with cost
and waits, hosting the fleet's controllers (`tidegate.fleet.hybrid.HybridFleet`: the HPA-driven cloud pools,
overflow to the burst queue, spot notices, the links, the budget) as `tidegate serve` and `tidegate kube` do:
`Simulation` implements their port (`tidegate.fleet.port.FleetPort`) and none of their rules.
What is the simulator's own is the world around them: the spot market drawing notices (`spot.py`), what a
pod's preStop checkpoint saves, the scripted link outages (`outage.py`), and data gravity
(`gravity.DataGravity`: prefetch, cache, checkpoint traffic over `link.Link`), which costs nothing when not
configured.

Controllers run against a `Clock`: simulated time by default; on a `WallClock` (`clock=`) the same
controllers run as wall time comes, optionally sped up, and make the same decisions.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import zlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from tidegate.autoscale.hpa import HPASpec, status_document
from tidegate.clock import EventLoop, SimClock, Timer
from tidegate.fleet.burst import Burst
from tidegate.fleet.hpa_supply import QueueFigures
from tidegate.fleet.hybrid import HybridFleet
from tidegate.fleet.pool import Pool
from tidegate.fleet.port import EventKind, RunningJob, WaitingJob
from tidegate.fleet.scaling import QueueTree
from tidegate.lifecycle.policies import JobPolicy, Resolution, verdict
from tidegate.model.objects import DEFAULT_NAMESPACE, JobEvent, Node, Queue
from tidegate.model.quantity import parse_quantity
from tidegate.model.resources import Resources
from tidegate.scheduler.scheduler import cyclic_gc_paused
from tidegate.scheduler.snapshot import Decisions
from tidegate.sim.core import Core
from tidegate.sim.datasets import LruCache
from tidegate.sim.gravity import DataGravity, Where, link_capacity, per_pod_cap
from tidegate.sim.link import Link
from tidegate.sim.meter import Level, Meter
from tidegate.sim.outage import LinkOutages
from tidegate.sim.spec import ScenarioSpec, SimulationSpec
from tidegate.sim.spot import Interruptions, grace_warning, prestop
from tidegate.sim.workload import SimJob, group_of_pod, pod_requests, to_group

#: Events at the same instant run in this order: completions free capacity before a cycle uses it.
PRIORITY_RELEASE, PRIORITY_ARRIVAL, PRIORITY_CYCLE, PRIORITY_AUTOSCALE = 0, 1, 2, 3
#: A run without `untilSeconds` stops when nothing has changed for this long after the last arrival (or
#: twice the scenario's budget period or burst wait, if longer), with jobs waiting and none running.
STALL_SECONDS = 7 * 86400.0


@dataclass(slots=True)
class Running:
    """A job whose gang is placed: where its pods are and when it will finish."""

    job: SimJob
    group_key: str
    nodes: list[str]
    local_gpus: float
    cloud_gpus: float
    started_at: float
    timer: Timer | None = None
    #: When the job's work began (its data had arrived); None while it waits for data.
    work_started: float | None = None


@dataclass(slots=True)
class DataInputs:
    """What data gravity needs besides the pools: dataset sizes and a checkpoint's size, in bytes."""

    sizes: dict[str, float] = field(default_factory=dict)
    checkpoint_size: float = 0.0


@dataclass(slots=True)
class Outcome:
    """What a finished run leaves for summaries and reports: series, jobs, events, pools (no live state,
    so it can travel between processes)."""

    name: str
    end: float
    idc_gpus: int
    meter: Meter
    jobs: list[SimJob]
    pools: dict[str, Pool]
    events: list[tuple[float, str]]
    #: Configurations that work against themselves (e.g. a grace period longer than the spot notice).
    warnings: list[str] = field(default_factory=list)
    #: Budget queue changes (0 without a budget).
    budget_changes: int = 0
    #: The link outages' events (cuts, restores, every job they touched), also among `events`.
    outage_events: list[tuple[float, str]] = field(default_factory=list)
    #: A digest of every placement and eviction, in order (time, job, nodes): equal runs placed alike.
    placements_digest: str = ""
    #: Each HPA's status at the end (`status_document`, with its name and pool): replicas, metrics, conditions.
    hpas: list[dict[str, Any]] = field(default_factory=list)


def static_quotas(queues: list[Queue]) -> list[Queue]:
    """Static quotas: every queue capped at its deserved share (nothing lent, nothing borrowed)."""
    out = []
    for queue in queues:
        if queue.deserved is None:
            out.append(queue)
            continue
        capability = dict(queue.capability or {})
        capability.update(queue.deserved)
        out.append(dataclasses.replace(queue, capability=Resources(capability, keep_zeros=True)))  # a declared 0 caps
    return out


def cloud_spend(pools: list[Pool], meter: Meter, now: float) -> float:
    """What the cloud pools have billed from time 0 to `now` (node-seconds x price per hour / 3600)."""
    return sum(
        meter[f"billed_nodes/{pool.name}"].integral(now) * pool.spec.pricing.per_hour / 3600
        for pool in pools
        if pool.is_cloud
    )


class Simulation:
    """One scenario over one workload; `run()` replays it and fills `meter`, `jobs` and `events`."""

    def __init__(
        self,
        name: str,
        core: Core,
        queues: list[Queue],
        pools: list[Pool],
        hpas: list[HPASpec],
        jobs: list[SimJob],
        scenario: ScenarioSpec,
        sim: SimulationSpec,
        on_progress: Callable[[float], None] | None = None,
        interruptions: Mapping[str, Interruptions] | None = None,
        policy: JobPolicy | None = None,
        data: DataInputs | None = None,
        clock: EventLoop | None = None,
    ) -> None:
        self.name = name
        self.core = core
        #: Simulated time by default; a WallClock runs the same controllers as wall time comes.
        self.clock: EventLoop = clock if clock is not None else SimClock()
        self.scenario = scenario
        self.sim = sim
        self.on_progress = on_progress
        self.queues = {q.name: q for q in queues}
        self._tree = QueueTree(queues)
        self.pools = {p.name: p for p in pools}
        self.node_pool: dict[str, Pool] = {}
        self.jobs = jobs
        self.meter = Meter()
        #: The levels every arrival, start and end moves, looked up once (created at 0 as on first use; a
        #: node's is its pool's `pool_gpus`, kept like `node_pool` after the node has gone).
        self._demand_gpus = self.meter["demand_gpus"]
        self._local_gpus = self.meter["local_gpus"]
        self._cloud_gpus = self.meter["cloud_gpus"]
        self._node_gpus: dict[str, Level] = {}
        self.events: list[tuple[float, str]] = []
        self.pending: dict[str, SimJob] = {}  # group key -> job waiting for placement
        #: When each unpinned pending job's wait began, by queue then group key, in `pending`'s order: what
        #: `pending_seconds` sums every HPA sync (kept by `_pend` and `_unpend` alongside `pending`).
        self._waits: dict[str, dict[str, float]] = {}
        #: The pending jobs that may overflow (unpinned, outside the burst queue), in `pending`'s order, as overflow
        #: sees them: what it looks at every cycle (`waiting(outside=...)`; kept by `_pend` and `_unpend`, made
        #: once a wait: what a WaitingJob says of a job changes only when it stops waiting or moves).
        self._burstable: dict[str, WaitingJob] = {}
        self.running: dict[str, Running] = {}  # group key -> placed job
        self.node_pods: dict[str, set[str]] = {}  # node -> group keys with pods there
        self.finished = 0  # jobs that ended: completed or failed for good
        self.policy = policy or JobPolicy()
        #: Spot pools' interruption models (only pools that interrupt), one seeded generator each.
        self.spot = dict(interruptions or {})
        self.spot_rng = {name: np.random.default_rng([sim.seed, zlib.crc32(name.encode())]) for name in self.spot}
        self.terminating: set[str] = set()  # group keys whose pods run their preStop hook
        self.warnings = [w for name, i in sorted(self.spot.items()) if (w := self._grace_warning(name, i))]
        #: The link outages' events (cuts, restores, every job they touched), also among `events`.
        self.outage_events: list[tuple[float, str]] = []
        self._cycle_at: float | None = None
        self._last_cycle = -math.inf
        #: When an idle cycle a departure asked for would run (it is left out of the clock: see _want_cycle).
        self._idle_cycle_at: float | None = None
        #: When a cycle is due because a plugin's votes change then (`Decisions.wake_at`), if one is.
        self._wake_at: float | None = None
        self._placements = hashlib.blake2b(digest_size=8)  # every start and eviction: see Outcome
        self.links: dict[str, Link] = {}
        #: Each link's rate and transfer-count levels, looked up once (`_meter_link`: every transfer's start and end).
        self._link_levels: dict[str, tuple[Level, Level]] = {}
        self.data = self._data_gravity(pools, data) if data is not None and scenario.data_gravity.enabled else None
        burst = scenario.burst.enabled
        self._cloud = [p for p in pools if p.is_cloud]
        self.fleet = HybridFleet(
            self,
            self.clock,
            pools,
            hpas if burst else (),
            self.queues,
            Burst(scenario.burst.queue, scenario.burst.after_seconds) if burst else None,
            scenario.budget if burst else None,
            release_priority=PRIORITY_RELEASE,
            origin=0.0,
        )
        self.outages = LinkOutages(self.clock, self.fleet.links, self.meter, scenario.link_outages)
        self.fleet.sizing.start(p for p in pools if burst or not p.is_cloud)
        # Without burst, spot interruptions or link outages, only arrivals give the scheduler work between
        # cycles (and each asks for a cycle): a departure's cycle that would find nothing to do is left out.
        self._leave_out_idle = not burst and not self.spot and not scenario.link_outages
        self._last_arrival = max((job.submitted for job in jobs), default=-math.inf)
        #: What could still free a waiting job after a long quiet spell: a budget period turning (it restores
        #: the queue), a job's wait reaching the burst threshold, a scripted link cut ending.
        budget = self.fleet.budget
        waits = [budget.period_s if budget else 0.0, scenario.burst.after_seconds if burst else 0.0]
        self._stall_seconds = max(STALL_SECONDS, *(2 * wait for wait in waits))
        self._scripted_until = max((o.start + o.duration_seconds for o in scenario.link_outages), default=-math.inf)

    # -- workload -------------------------------------------------------------------------------------
    def run(self) -> None:
        clock = self.clock
        jobs = self.jobs
        clock.call_each([job.submitted for job in jobs], lambda i: self._arrive(jobs[i]), PRIORITY_ARRIVAL)
        self.fleet.start(PRIORITY_AUTOSCALE, at=0.0)
        for name, interruptions in sorted(self.spot.items()):
            for when in interruptions.at_seconds:
                clock.call_at(when, partial(self._notice_oldest, self.pools[name]), PRIORITY_RELEASE)
        self.outages.schedule()
        horizon = self.sim.until_seconds or math.inf
        step = 6 * 3600.0
        seen, since = self._state(), clock.now()
        with cyclic_gc_paused():  # a run makes no cyclic garbage (tests/test_sim_garbage.py): passes find none
            while (upcoming := clock.peek()) is not None and clock.now() < horizon and not self.done:
                clock.run(until=self._step_end(upcoming, step, horizon, since))
                if self.on_progress:
                    self.on_progress(clock.now())
                state = self._state()
                if state != seen:
                    seen, since = state, clock.now()
                elif self._stuck(since):
                    self.warnings.append(
                        f"the run stopped at day {clock.now() / 86400:.1f}: {len(self.pending)} job(s) still waited "
                        f"and nothing had changed for {self._stall_seconds / 86400:.3g} days (nothing could place "
                        "them: a queue capability of 0, say, or a pod no node can take)"
                    )
                    break
        self.end = min(clock.now(), self.last_change)

    def _step_end(self, upcoming: float, step: float, horizon: float, since: float) -> float:
        """Where the run's next step ends: `step` seconds on, or, when no event comes before then, the last
        step end on the same grid before the next event (`upcoming`) or before the stall check could stop
        the run, whichever is first. The steps skipped would run no event and change nothing, so the run
        decides the same; the jump keeps a run whose next event is years away from stepping there 6 h at a
        time, and one near the largest float, where now + step == now, from never moving."""
        now = self.clock.now()
        end = min(now + step, horizon)
        if upcoming <= end:
            return end
        steps = math.floor((upcoming - now) / step)  # step ends at or before the next event
        if not self.running and not any(p.provisioning for p in self.pools.values()):
            # the first step end at which `_stuck` could hold, as the steps one by one would find it
            scripted = max(self._last_arrival, self._scripted_until)
            after_script = math.floor((scripted - now) / step) + 1 if math.isfinite(scripted) else 1
            steps = min(steps, max(math.ceil((since + self._stall_seconds - now) / step), after_script, 1))
        end = min(now + max(steps, 1) * step, horizon)
        return end if end > now else min(upcoming, horizon)

    def _state(self) -> tuple[int, ...]:
        """What a stuck run leaves unchanged: jobs finished, waiting and running, and each pool's nodes."""
        pools = [len(p.nodes) + p.provisioning for _, p in sorted(self.pools.items())]
        return (self.finished, len(self.pending), len(self.running), *pools)

    def _stuck(self, since: float) -> bool:
        """Every job has arrived, every scripted link cut has ended, none runs, no node is coming, and nothing
        changed for the stall window: the jobs still waiting never will be placed (only the controllers'
        periodic checks keep the clock going)."""
        now = self.clock.now()
        quiet = not self.running and not any(p.provisioning for p in self.pools.values())
        scripted = max(self._last_arrival, self._scripted_until)
        return quiet and now > scripted and now - since >= self._stall_seconds

    @property
    def done(self) -> bool:
        """Every job has finished and every cloud pool is back to zero nodes."""
        idle = self.finished == len(self.jobs) and not self.pending and not self.running
        return idle and not any(p.is_cloud and (p.nodes or p.provisioning) for p in self.pools.values())

    @property
    def last_change(self) -> float:
        """When the last job finished or the last cloud node left (the end of the run)."""
        finishes = [j.finished for j in self.jobs if j.finished is not None]
        billing = [self.meter[f"billed_nodes/{p.name}"].since for p in self.pools.values() if p.is_cloud]
        return max([0.0, *finishes, *billing]) if self.done else self.clock.now()

    def _arrive(self, job: SimJob) -> None:
        job.queued_since = self.clock.now()
        key = self._submit(job)
        self._demand(job.gpus)
        self._want_cycle()
        burst = self.scenario.burst
        if burst.enabled and not job.pinned and job.queue != burst.queue:
            # wake the scheduler when the job has waited long enough to overflow
            deadline = job.pending_since + burst.after_seconds  # its wait starts again after a restart
            self.clock.call_at(deadline, partial(self._overflow_due, key), PRIORITY_CYCLE)

    def _overflow_due(self, key: str) -> None:
        """A job has waited long enough to overflow: a cycle, for overflow to move it, if it still waits where
        it may (a job placed, gone, or moved by then, or restarted as another group, asks for none)."""
        if key in self._burstable:
            self._want_cycle()

    def _submit(self, job: SimJob) -> str:
        overflow = self.fleet.overflow
        if overflow is not None:  # a job restarted into the burst queue while every link is cut goes home
            job.queue = overflow.queue_for(job.name, job.queue, job.home_queue)
        to_cloud = job.queue == self.scenario.burst.queue
        data_nodes = self.data.data_nodes(job.dataset) if self.data is not None and to_cloud and job.dataset else ()
        weight = self.scenario.data_gravity.locality_weight
        group, pods = to_group(job, to_cloud, job.restarts, data_nodes, weight)
        self.core.add_group(group, pods)
        group_key = group.key
        self._pend(group_key, job)
        return group_key

    def _pend(self, group_key: str, job: SimJob) -> None:
        """The job waits for placement: in `pending` and, unless pinned, among its queue's waits."""
        self.pending[group_key] = job
        if not job.pinned:
            self._waits.setdefault(job.queue, {})[group_key] = job.pending_since
            if job.queue != self.scenario.burst.queue:
                self._burstable[group_key] = self._waiting_job(group_key, job)

    def _unpend(self, group_key: str) -> SimJob | None:
        """The job no longer waits (placed, or moving to another queue); None if it was not pending."""
        job = self.pending.pop(group_key, None)
        if job is not None and not job.pinned:
            del self._waits[job.queue][group_key]
            self._burstable.pop(group_key, None)
        return job

    def _demand(self, gpus: float) -> None:
        self._demand_gpus.add(gpus, self.clock.now())

    # -- scheduling -----------------------------------------------------------------------------------
    def _want_cycle(self, departure: bool = False) -> None:
        """Ask for a scheduling cycle (none if one is due already).

        After a departure, with `_leave_out_idle`, a cycle that would find nothing to do (the core is idle:
        every waiting job is hopeless, and departures cannot change that) is left out of the clock: about
        half of a replay's cycles. Only its time is kept. Before that time only departures and arrivals reach
        the scheduler, and an arrival asks for a cycle: it gets this one, at that time, as it would have.
        Once the time has passed, it counts as the last cycle, as when an idle cycle ran (its only effect).
        A cycle is left out only before the last arrival, whose event keeps the clock running past it, so
        the run ends as before (it ends when the clock has nothing left)."""
        if self._cycle_at is not None:
            return
        now = self.clock.now()
        idle_at = self._idle_cycle_at
        if idle_at is not None:
            if now <= idle_at:  # not come yet: a departure leaves it out still, anything else brings it back
                if not departure:
                    self._idle_cycle_at = None
                    self._cycle_at = idle_at
                    self.clock.call_at(idle_at, self._cycle, PRIORITY_CYCLE)
                return
            self._idle_cycle_at = None
            self._last_cycle = idle_at
        period = self.sim.scheduling_period_seconds
        # On the period's grid, and never twice at one instant: what a cycle's decisions cause
        # (restarted victims, overflowed jobs) waits for the next period.
        # (a fractional period can land a hair before `now`: 90 * 0.7 is 62.99999999999999, not 63)
        when = max(math.ceil(now / period) * period, self._last_cycle + period, now)
        if departure and self._leave_out_idle and when <= self._last_arrival and self.core.idle():
            self._idle_cycle_at = when
            return
        self._cycle_at = when
        self.clock.call_at(when, self._cycle, PRIORITY_CYCLE)

    def _cycle(self) -> None:
        self._cycle_at = None
        now = self.clock.now()
        self._last_cycle = now
        decisions = self.core.cycle(now)
        self._apply(decisions, now)
        self.fleet.after_cycle(now)
        wake = decisions.wake_at  # a waiting job's sla deadline: a cycle then may admit it, with no event to ask
        if wake < math.inf and self.pending and (self._wake_at is None or wake < self._wake_at):
            self._wake_at = wake
            self.clock.call_at(wake, self._wake, PRIORITY_CYCLE)

    def _wake(self) -> None:
        self._wake_at = None
        self._want_cycle()

    def _apply(self, decisions: Decisions, now: float) -> None:
        placed: dict[str, list[str]] = {}
        for bind in decisions.binds:
            group_key = group_of_pod(bind.pod)
            placed.setdefault(group_key, []).append(bind.node)
        placements = self._placements
        for group_key, nodes in placed.items():
            job = self._unpend(group_key)
            if job is None:
                continue
            placements.update(f"{now!r} {group_key} {' '.join(nodes)}\n".encode())
            self._start(job, group_key, nodes, now)
        for eviction in decisions.evictions:
            group_key = group_of_pod(eviction.pod)
            if group_key in self.running and group_key not in self.terminating:
                placements.update(f"{now!r} {group_key} evicted\n".encode())
                self._evicted(self.running[group_key], f"evicted: {eviction.reason}")

    def _start(self, job: SimJob, group_key: str, nodes: list[str], now: float) -> None:
        per_pod = job.gpus / max(len(nodes), 1)
        local = cloud = 0.0  # summed pod by pod, in order, as sum() would
        node_pods = self.node_pods
        for node in nodes:
            if self.node_pool[node].is_cloud:
                cloud += per_pod
            else:
                local += per_pod
            groups = node_pods.get(node)
            if groups is None:
                node_pods[node] = {group_key}
            else:
                groups.add(group_key)
            self._node_gpus[node].add(per_pod, now)
        if job.started is None:
            job.started = now
        if job.queued_since is not None:
            job.waited_s += now - job.queued_since
            job.queued_since = None
        run = Running(job, group_key, nodes, local, cloud, now)
        self.running[group_key] = run
        self._move_gpus(local, cloud, now)
        if self.data is None or self.data.stage(group_key, job, nodes):
            self._begin_work(run)

    def _begin_work(self, run: Running) -> None:
        """The job's data is there: its work runs from now until done (or a restart)."""
        now = self.clock.now()
        run.work_started = now
        if now > run.started_at:
            self._count_data_wait(run, now)
        remaining = run.job.record.duration_s - run.job.done_s
        run.timer = self.clock.call_at(now + remaining, partial(self._finish, run), PRIORITY_RELEASE)
        if self.data is not None:
            self.data.working(run.group_key, run.job, run.nodes)

    def _data_ready(self, group_key: str) -> None:
        run = self.running.get(group_key)
        if run is not None and run.work_started is None:
            self._begin_work(run)

    def _count_data_wait(self, run: Running, now: float) -> None:
        """The gang held its GPUs idle from placement until now, waiting for data."""
        waited = now - run.started_at
        run.job.prefetch_s += waited
        where = "cloud" if run.cloud_gpus else "idc"  # a cloud prefetch, or an IDC cache miss read
        self.meter[f"prefetch_seconds/{where}"].add(waited, now)
        per_pod = run.job.gpus / max(len(run.nodes), 1)
        for node in run.nodes:
            self.meter[f"data_idle_gpu_seconds/{self.node_pool[node].name}"].add(per_pod * waited, now)

    def _release(self, run: Running) -> None:
        now = self.clock.now()
        if self.data is not None:
            if run.work_started is None:
                self._count_data_wait(run, now)
            self.data.release(run.group_key)
        self.running.pop(run.group_key, None)
        for node in run.nodes:
            groups = self.node_pods.get(node)
            if groups is not None:
                groups.discard(run.group_key)
            if not groups:
                self.fleet.sizing.emptied(self.node_pool[node], node)
        self.core.remove_group(run.group_key)
        self._move_gpus(-run.local_gpus, -run.cloud_gpus, now)
        per_pod = run.job.gpus / max(len(run.nodes), 1)
        for node in run.nodes:
            self._node_gpus[node].add(-per_pod, now)
        self._want_cycle(departure=True)

    def _move_gpus(self, local: float, cloud: float, now: float) -> None:
        """Allocated GPUs change by `local` in the IDC and `cloud` in the cloud (adding 0 changes no level)."""
        if local:
            self._local_gpus.add(local, now)
        if cloud:
            self._cloud_gpus.add(cloud, now)

    def _finish(self, run: Running) -> None:
        run.timer = None  # its event points back at the run: unlinked, reference counting frees both
        self.terminating.discard(run.group_key)
        self._release(run)
        run.job.finished = self.clock.now()
        self.finished += 1
        self._demand(-run.job.gpus)

    def _stop_work(self, run: Running, stopped_at: float, saved_all: bool) -> float:
        """The gang stops working at `stopped_at`: the work up to its last periodic checkpoint is kept
        (all of it when a final checkpoint completed); returns the GPU-seconds of work lost."""
        timer = run.timer
        if timer is not None:
            timer.cancel()
            run.timer = None
        job = run.job
        start = run.work_started if run.work_started is not None else stopped_at  # still fetching data: no work yet
        ran = max(stopped_at - start, 0.0)
        every = job.checkpoint_every_s
        periodic = math.floor(ran / every) * every if every > 0 else 0.0
        saved = min(ran if saved_all else periodic, job.record.duration_s - job.done_s)
        if self.data is not None:
            saved = self.data.restart_progress(run.group_key, job, saved)
        job.done_s += saved
        lost = (ran - saved) * job.gpus
        self.meter["lost_gpu_seconds"].add(lost, self.clock.now())
        return lost

    def _evicted(self, run: Running, reason: str, stopped_at: float | None = None, saved_all: bool = False) -> None:
        """The gang's pods are evicted (PodEvicted): it stops, releases its GPUs, and the job's policies
        decide (see tidegate/lifecycle/policies.py): restart from its last checkpoint, fail or complete."""
        now = self.clock.now()
        self._stop_work(run, now if stopped_at is None else stopped_at, saved_all)
        self._release(run)
        job = run.job
        self._demand(-job.gpus)
        decided = verdict(self.policy, JobEvent.POD_EVICTED, job.retries)
        job.retries = decided.retries
        if decided.resolution is Resolution.FAIL:
            self._end(job, failed=f"{reason}; {decided.rule}")
            return
        if decided.resolution is Resolution.COMPLETE:
            self._end(job, failed="")
            self.events.append((now, f"{job.name}: completed by policy ({reason}; {decided.rule})"))
            return
        job.restarts += 1
        self.events.append((now, f"{job.name}: restarted ({reason})"))
        self._arrive(job)

    def _end(self, job: SimJob, failed: str) -> None:
        """A job ends without finishing its work: failed for good (with the reason), or completed by policy."""
        now = self.clock.now()
        self.finished += 1
        if failed:
            job.failed_reason = failed
            self.events.append((now, f"{job.name}: failed ({failed})"))
        else:
            job.finished = now

    # -- the spot market (the notices it sends; what a notice does is the fleet's) --------------------
    def _grace_warning(self, pool: str, interruptions: Interruptions) -> str:
        policy = self.policy
        return grace_warning(policy.grace_s, policy.template or "(no jobTemplate)", pool, interruptions)

    def _schedule_notice(self, pool: Pool, node: str) -> None:
        """Draw when a new node of a spot pool will get its interruption notice."""
        when = self.spot[pool.name].draw_notice(self.clock.now(), self.spot_rng[pool.name])
        if when is not None:
            self.clock.call_at(when, partial(self._notice, pool, node), PRIORITY_RELEASE)

    def _notice_oldest(self, pool: Pool) -> None:
        """An explicit notice instant: the pool's oldest node not already under notice is interrupted."""
        node = next((n for n in pool.nodes if not self.fleet.spot.leaving(n)), None)
        if node is None:
            self.events.append((self.clock.now(), f"{pool.name}: spot interruption with no node to interrupt"))
            return
        self._notice(pool, node)

    def _notice(self, pool: Pool, node: str) -> None:
        self.fleet.spot.notice(pool, node, self.spot[pool.name].notice_s)

    def interrupt(self, pool: Pool, node: str, notice_s: float) -> list[str]:
        """Each pod's preStop hook checkpoints: the gang holds its GPUs until the checkpoint is written, the grace
        period runs out or the instance dies (`prestop`), and is then evicted."""
        now = self.clock.now()
        self.meter["spot_interruptions"].add(1, now)
        groups = sorted(g for g in self.node_pods.get(node, ()) if g in self.running and g not in self.terminating)
        stop = prestop(self.policy.checkpoint_s, self.policy.grace_s, notice_s)
        for group_key in groups:
            run = self.running[group_key]
            self.terminating.add(group_key)
            self.meter["spot_interrupted_jobs"].add(1, now)
            callback = partial(self._preempted_by_provider, run, pool, node, now, stop.saved)
            self.clock.call_at(now + stop.hold_s, callback, PRIORITY_RELEASE)
        return [self.running[g].job.name for g in groups]

    def _preempted_by_provider(self, run: Running, pool: Pool, node: str, notice_at: float, saved: bool) -> None:
        """The pod's preStop hook is over (checkpoint written, grace period out, or instance dead):
        the work since the notice's checkpoint (or since the last periodic one) is lost."""
        if self.running.get(run.group_key) is not run:
            return
        self.terminating.discard(run.group_key)
        now = self.clock.now()
        lost_before, restarts_before = self.meter["lost_gpu_seconds"].value, run.job.restarts
        outcome = "preStop checkpoint saved" if saved else "preStop checkpoint not completed"
        if saved:
            self.meter["spot_checkpoints_saved"].add(1, now)
        self._evicted(run, f"spot interruption of {node}, {outcome}", stopped_at=notice_at, saved_all=saved)
        lost = self.meter["lost_gpu_seconds"].value - lost_before
        self.meter["spot_restarts"].add(run.job.restarts - restarts_before, now)
        self.meter["spot_lost_gpu_seconds"].add(lost, now)
        price_per_gpu_hour = pool.spec.pricing.per_hour / max(pool.gpus_per_node, 1)
        self.meter["spot_lost_cost"].add(lost / 3600 * price_per_gpu_hour, now)

    def _set_queue(self, queue: Queue) -> None:
        """A live queue edit (as `PATCH /queues/<name>`): the scheduler sees it at the next cycle."""
        self.queues[queue.name] = queue
        self.core.set_queue(queue)
        self._want_cycle()

    def _move(self, group_key: str, job: SimJob, queue: str) -> None:
        """Resubmit a pending job to another queue (its PodGroup is recreated there)."""
        self.core.remove_group(group_key)
        self._unpend(group_key)
        job.queue = queue
        self._submit(job)

    def pending_seconds(self) -> dict[str, float]:
        """volcano_queue_pending_jobs_duration_seconds: summed seconds that burstable jobs have been
        pending, per queue; a parent queue sums its children."""
        now = self.clock.now()
        own: dict[str, float] = {}
        for queue, waits in self._waits.items():
            if waits:
                waited = 0.0
                for since in waits.values():  # one at a time, in `pending`'s order: the same float sum
                    waited += now - since
                own[queue] = waited
        return self._tree.totals(own)

    # -- the fleet's port (tidegate/fleet/port.py) ----------------------------------------------------
    def add_nodes(self, nodes: Sequence[Node]) -> None:
        self.core.add_nodes(nodes)

    def remove_nodes(self, names: Iterable[str]) -> None:
        self.core.remove_nodes(names)

    def set_schedulable(self, name: str, schedulable: bool) -> None:
        self.core.set_schedulable(name, schedulable)

    def node_ready(self, pool: Pool, node: Node) -> None:
        self.node_pool[node.name] = pool
        self._node_gpus[node.name] = self.meter[f"pool_gpus/{pool.name}"]
        if pool.name in self.spot:
            self._schedule_notice(pool, node.name)

    def evict_node(self, pool: Pool, node: str) -> None:
        for group_key in sorted(self.node_pods.pop(node, set())):
            run = self.running.get(group_key)
            if run is not None:
                self.terminating.discard(group_key)
                self._evicted(run, f"node {node} removed")
        if self.data is not None:
            self.data.node_removed(node)

    def busy(self, node: str) -> int:
        return len(self.node_pods.get(node, ()))

    def node_requests(self, node: str) -> Resources:
        total = Resources()
        for group_key in self.node_pods.get(node, ()):
            run = self.running.get(group_key)
            if run is not None:
                total = total + pod_requests(run.job.record).scaled(run.nodes.count(node))
        return total

    def pods_on(self, node: str) -> int:
        runs = (self.running.get(group_key) for group_key in self.node_pods.get(node, ()))
        return sum(run.nodes.count(node) for run in runs if run is not None)

    def queue_figures(self) -> dict[str, QueueFigures]:
        waiting = dict.fromkeys(self.queues, 0)
        running = dict.fromkeys(self.queues, 0)
        held = {name: Resources() for name in self.queues}
        for job in self.pending.values():
            waiting[job.queue] = waiting.get(job.queue, 0) + 1
        for run in self.running.values():
            queue = run.job.queue
            running[queue] = running.get(queue, 0) + 1
            held[queue] = held.get(queue, Resources()) + pod_requests(run.job.record).scaled(len(run.nodes))
        return {
            name: QueueFigures(waiting[name], running[name], held[name], queue.weight)
            for name, queue in self.queues.items()
        }

    def billed(self, pool: Pool, change: int) -> None:
        self.meter[f"billed_nodes/{pool.name}"].add(change, self.clock.now())

    def sized(self, pool: Pool) -> None:
        self.meter[f"nodes/{pool.name}"].set(len(pool.nodes), self.clock.now())

    def waiting(self, outside: str = "") -> list[WaitingJob]:
        if outside == self.scenario.burst.queue:  # the pending jobs that may overflow, as kept
            return list(self._burstable.values())
        return [
            self._waiting_job(key, job)
            for key, job in self.pending.items()
            if not outside or (job.queue != outside and not job.pinned)
        ]

    @staticmethod
    def _waiting_job(key: str, job: SimJob) -> WaitingJob:
        return WaitingJob(key, job.queue, job.home_queue, job.pending_since, DEFAULT_NAMESPACE, job.pinned)

    def reason(self, key: str) -> str:
        return self.core.pending_reason(key)

    def admits(self, queue: str, namespace: str) -> bool:
        return self.core.has_queue(queue) and self.core.namespace_refusal(queue, namespace) is None

    def move(self, key: str, queue: str) -> None:
        self._move(key, self.pending[key], queue)

    def running_on(self, nodes: Collection[str]) -> list[RunningJob]:
        return [
            RunningJob(key, run.work_started is None)
            for key, run in self.running.items()
            if any(node in nodes for node in run.nodes)
        ]

    def fail(self, key: str, why: str) -> None:
        self._evicted(self.running[key], why)

    def link_changed(self, cluster: str, up: bool) -> None:
        self.meter["link_cut_clouds"].add(-1 if up else 1, self.clock.now())
        link = self.links.get(cluster)
        if link is not None:
            link.set_up(up)

    def spend(self, at: float) -> float:
        return cloud_spend(self._cloud, self.meter, at)

    def set_queue(self, queue: Queue) -> Queue:
        self._set_queue(queue)
        return queue

    def record(self, text: str, kind: EventKind, job: str = "") -> None:
        """An event of the fleet's; a link outage's (and a job it touched) also among the outage events."""
        event = (self.clock.now(), f"{self._job_name(job)}: {text}" if job else text)
        self.events.append(event)
        if kind is EventKind.LINK or kind is EventKind.LINK_AFFECTED:
            self.outage_events.append(event)
            if kind is EventKind.LINK_AFFECTED:
                self.meter["outage_affected_jobs"].add(1, event[0])

    def _job_name(self, key: str) -> str:
        """A job's name by its group key (a name is its own key before the job is submitted)."""
        job = self.pending.get(key)
        if job is None:
            run = self.running.get(key)
            job = run.job if run is not None else None
        return job.name if job is not None else key

    def want_cycle(self) -> None:
        self._want_cycle()

    def active(self) -> bool:
        return self.finished < len(self.jobs)

    def failed(self, what: str, exc: Exception) -> None:
        raise exc

    # -- data gravity ---------------------------------------------------------------------------------
    def _data_gravity(self, pools: list[Pool], data: DataInputs) -> DataGravity | None:
        """The data model for these pools: the IDC clusters' caches and the cloud clusters' links.
        None when there is nothing to model (no dataset read, no link)."""
        caches: dict[str, LruCache] = {}
        miss_read: dict[str, float] = {}
        per_pod: dict[str, float] = {}
        clusters = {p.cluster_name: p.cluster for p in pools}
        for name, cluster in sorted(clusters.items()):
            if cluster.cache is not None:
                caches[name] = LruCache(float(parse_quantity(cluster.cache.capacity)))
                if cluster.cache.miss_read_gbps:
                    miss_read[name] = link_capacity(cluster.cache.miss_read_gbps)
            if cluster.link is not None:
                meter_link = partial(self._meter_link, name)
                self.links[name] = Link(name, self.clock, link_capacity(cluster.link.bandwidth_gbps), meter_link)
                per_pod[name] = per_pod_cap(cluster.link.per_pod_gbps)
        reads_data = any(job.dataset for job in self.jobs)
        if not self.links and not (caches and reads_data):
            return None

        wheres: dict[str, Where] = {}  # one (immutable) Where a pool: asked several times a placement and checkpoint

        def where(node: str) -> Where:
            pool = self.node_pool[node]
            at = wheres.get(pool.name)
            if at is None:
                at = wheres[pool.name] = Where(pool.cluster_name, pool.is_cloud)
            return at

        return DataGravity(
            self.clock,
            self.meter,
            data.sizes,
            caches,
            miss_read,
            self.links,
            per_pod,
            data.checkpoint_size,
            where,
            self._data_ready,
        )

    def _meter_link(self, cluster: str, rate: float, transfers: int, now: float) -> None:
        levels = self._link_levels.get(cluster)
        if levels is None:  # created on the link's first change, in this order, as before they were kept
            levels = self._link_levels[cluster] = (
                self.meter[f"link_rate/{cluster}"],
                self.meter[f"link_transfers/{cluster}"],
            )
        levels[0].set(rate, now)
        levels[1].set(transfers, now)

    def outcome(self) -> Outcome:
        changes = self.fleet.budget.changes if self.fleet.budget else 0
        return Outcome(
            self.name,
            self.end,
            self.idc_gpus,
            self.meter,
            self.jobs,
            self.pools,
            self.events,
            self.warnings,
            changes,
            self.outage_events,
            self._placements.hexdigest(),
            [
                {"name": scaler.spec.name, "pool": scaler.pool.name, **status_document(scaler.controller.status)}
                for scaler in self.fleet.sizing.autoscalers
            ],
        )

    @property
    def idc_gpus(self) -> int:
        return sum(len(p.nodes) * p.gpus_per_node for p in self.pools.values() if not p.is_cloud)
