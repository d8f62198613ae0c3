"""The recent history of the served node pools and the cloud budget, for the dashboard's charts
(`GET /pools/history`).

`GET /pools` says how each pool is now; a platform team wants to see it move: nodes, nodes provisioning and
draining, what the HPA last recommended and the metric it read, what is billed and spent. Every `interval`
seconds of the control plane's clock (5 s by default: the HPA syncs every 15 s) one sample of each pool and
of the budget is kept, the last `keep` (six hours at 5 s) in memory. A restart starts the history anew:
what lasts is in the store already (each pool's nodes and bill, the budget's period).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from tidegate.clock import EventLoop, Timer
from tidegate.live.control_plane import PRIORITY_FLEET, ControlPlane

DEFAULT_INTERVAL_SECONDS = 5.0
DEFAULT_KEEP = 4320


class PoolHistory:
    """Samples of every served pool and of the budget, oldest first."""

    def __init__(self, plane: ControlPlane, interval: float = DEFAULT_INTERVAL_SECONDS, keep: int = DEFAULT_KEEP):
        if not interval > 0 or keep < 1:
            raise ValueError(f"a history samples every {interval!r} s (> 0), keeping {keep!r} samples (>= 1)")
        self.plane, self.interval = plane, interval
        self.pools: dict[str, deque[dict[str, Any]]] = {}
        self.budget: deque[dict[str, Any]] = deque(maxlen=keep)
        self._keep = keep
        self._timer: Timer | None = None

    def sample(self) -> None:
        """One sample of each pool and of the budget, now."""
        now = self.plane.clock.now()
        for pool in self.plane.views.pools_view():
            status = pool["hpa_status"] or {}
            metrics = status.get("currentMetrics") or []
            current = metrics[0].get("current", {}) if metrics else {}
            value = next(iter(current.values()), None) if isinstance(current, dict) else None
            draining = len(pool["draining"])
            self.pools.setdefault(pool["name"], deque(maxlen=self._keep)).append(
                {
                    "time": now,
                    "nodes": len(pool["nodes"]) - draining,  # taking pods (or able to)
                    "provisioning": pool["provisioning"],
                    "draining": draining,
                    "billed": pool["billed_nodes"],
                    "desired": status.get("desiredReplicas"),  # the HPA's last recommendation
                    "metric": value,  # the value of the HPA's first metric at its last sync
                    "spent": pool["spent"],
                }
            )
        if self.plane.budget is not None:
            budget = self.plane.views.budget_view()
            self.budget.append(
                {"time": now, "spent": budget["spent"], "per_period": budget["per_period"], "period": budget["period"]}
            )

    def start(self, clock: EventLoop) -> None:
        """Sample now and every `interval` seconds on `clock` (the control plane's)."""

        def tick() -> None:
            self.sample()
            self._timer = clock.call_later(self.interval, tick, PRIORITY_FLEET + 1)

        self._timer = clock.call_later(0.0, tick, PRIORITY_FLEET + 1)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def view(self, since: float | None = None) -> dict[str, Any]:
        """The samples (after `since`, when given), with what each pool's HPA reads."""
        scalers = {scaler.pool.name: scaler for scaler in self.plane.fleet.sizing.autoscalers}
        out: dict[str, Any] = {"interval_seconds": self.interval, "pools": [], "budget": []}
        for name, samples in self.pools.items():
            scaler = scalers.get(name)
            first = scaler.spec.metrics[0] if scaler is not None and scaler.spec.metrics else None
            metric = str(getattr(first, "key", first)) if first is not None else ""
            out["pools"].append(
                {
                    "name": name,
                    "cloud": self.plane.fleet.pools[name].is_cloud,
                    "hpa": scaler.spec.name if scaler is not None else None,
                    "metric": metric,
                    "samples": [s for s in samples if since is None or s["time"] > since],
                }
            )
        out["budget"] = [s for s in self.budget if since is None or s["time"] > since]
        return out
