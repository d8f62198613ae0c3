"""What the node pools bill: nodes billed now and money spent, on the host's clock.

A cloud pool's node is billed from the autoscaler's request until it leaves, at the pool's price per hour
(`spec.pricing.perHour`), as the simulator's `cloud_cost` counts it; IDC pools are owned and bill nothing.
The bill is kept with each pool in the store, so spend goes on across a restart, and the nodes the
provider kept running while the control plane was down are billed for that time too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tidegate.fleet.pool import Pool


class Bill:
    """Per pool: nodes billed now, and money spent until the last change (spend since grows linearly)."""

    def __init__(self, pools: Iterable[Pool], now: float) -> None:
        pools = list(pools)
        #: Price per node-hour of each cloud pool.
        self.price = {pool.name: pool.spec.pricing.per_hour for pool in pools if pool.is_cloud}
        #: Nodes billed now (provisioning included), every pool.
        self.nodes = {pool.name: 0 for pool in pools}
        self._spent = {name: 0.0 for name in self.price}
        self._since = dict.fromkeys(self.price, now)

    def change(self, pool: str, nodes: int, now: float) -> None:
        """Billing starts (nodes > 0) or stops (nodes < 0) for that many of the pool's nodes, now."""
        if pool in self.price:
            self._spent[pool] = self.pool_spent(pool, now)
            self._since[pool] = now
        self.nodes[pool] += nodes

    def pool_spent(self, pool: str, now: float) -> float:
        """What the pool has billed until `now` (at or after its last change, or before it while its node
        count was the same)."""
        if pool not in self.price:
            return 0.0
        return self._spent[pool] + self.nodes[pool] * (now - self._since[pool]) * self.price[pool] / 3600

    def spent(self, now: float) -> float:
        """What every cloud pool has billed until `now`."""
        return sum(self.pool_spent(pool, now) for pool in self.price)

    def state(self, pool: str) -> dict[str, float]:
        """What the store keeps of the pool's bill."""
        if pool not in self.price:
            return {}
        return {"spent": self._spent[pool], "spent_at": self._since[pool]}

    def resume(self, pool: str, state: Mapping[str, Any], now: float) -> None:
        """Go on from a kept bill, once the pool's nodes are back (billed from `now`): the nodes it bills
        now ran while the control plane was down, so they are billed from the kept time."""
        if pool in self.price and "spent" in state:
            downtime = max(now - float(state["spent_at"]), 0.0)
            self._spent[pool] = float(state["spent"]) + self.nodes[pool] * downtime * self.price[pool] / 3600
            self._since[pool] = now
