"""A resource vector over named resources in canonical integer units (see quantity.py)."""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, Mapping

from tidegate.model.errors import FieldError
from tidegate.model.quantity import format_canonical, to_canonical

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
NVIDIA_GPU = "nvidia.com/gpu"
GPU_MEMORY = "volcano.sh/gpu-memory"
GPU_NUMBER = "volcano.sh/gpu-number"
#: A fraction of one card in thousandths (Alibaba's gpu_milli); 1000 is a whole card.
GPU_MILLI = "tidegate.io/gpu-milli"


class Resources(Mapping[str, int]):
    """An immutable resource vector; missing resources are zero, zero entries are dropped.

    With keep_zeros=True a zero entry is kept, so `name in r` tells a declared 0 from an absent name:
    a queue's spec.capability needs that (Volcano caps a declared `nvidia.com/gpu: "0"` at 0 but leaves
    an absent resource unlimited). Equality and hash follow the entries, so {gpu: 0} kept differs from
    {}; arithmetic (+, -, scaled) drops zeros again.
    """

    __slots__ = ("_hash", "_values")

    def __init__(self, values: Mapping[str, int] | Iterable[tuple[str, int]] = (), keep_zeros: bool = False) -> None:
        items = values.items() if isinstance(values, Mapping) else values
        self._values: dict[str, int] = {name: int(amount) for name, amount in items if amount or keep_zeros}
        self._hash: int | None = None  # computed once: resources key the scheduler's per-request caches

    @classmethod
    def parse(cls, spec: object, field: str, keep_zeros: bool = False) -> Resources:
        """Resources from a Kubernetes resource list such as {cpu: "500m", memory: "4Gi"}."""
        if spec is None:
            return cls()
        if not isinstance(spec, Mapping):
            raise FieldError(field, f"expected a map of resource name to quantity, got {spec!r}")
        return cls(
            {str(name): to_canonical(str(name), value, f"{field}[{name}]") for name, value in spec.items()},
            keep_zeros=keep_zeros,
        )

    def __getitem__(self, name: str) -> int:
        return self._values.get(name, 0)

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def items(self) -> ItemsView[str, int]:
        """The dict's own view (Mapping's generic one looks every value up again, in Python)."""
        return self._values.items()

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._values.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resources):
            return self._values == other._values
        return NotImplemented

    def __add__(self, other: Mapping[str, int]) -> Resources:
        out = dict(self._values)
        for name, amount in other.items():
            out[name] = out.get(name, 0) + amount
        return Resources(out)

    def __sub__(self, other: Mapping[str, int]) -> Resources:
        out = dict(self._values)
        for name, amount in other.items():
            out[name] = out.get(name, 0) - amount
        return Resources(out)

    def scaled(self, factor: int) -> Resources:
        return Resources({name: amount * factor for name, amount in self._values.items()})

    def fits_in(self, other: Mapping[str, int]) -> bool:
        """True when every resource here is at most the same resource in other."""
        return all(amount <= other.get(name, 0) for name, amount in self._values.items())

    def to_dict(self) -> dict[str, str]:
        """The vector as a Kubernetes resource list with human units."""
        return {name: format_canonical(name, amount) for name, amount in sorted(self._values.items())}

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in self.to_dict().items())
        return f"Resources({inner})"


EMPTY = Resources()
