"""Kubernetes resource quantities ("500m", "4096Gi", "1e3") parsed in exact integer arithmetic.

tidegate stores every resource as an integer in a canonical unit so that sums never drift:
bytes for memory-like resources, thousandths ("milli") for everything else, as Volcano does.
"""

from __future__ import annotations

import math
import re
import reprlib
from fractions import Fraction

from tidegate.model.errors import FieldError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
#: Longest quantity text accepted; far beyond any real value, and it keeps parsing cheap (Python refuses
#: to convert integers of more than 4300 digits, and "1e999999999" would take minutes in exact arithmetic).
MAX_QUANTITY_LENGTH = 64
#: Largest decimal exponent accepted in "1e3" notation (10**64 is already far beyond int64).
MAX_EXPONENT = 64
#: Largest canonical amount (int64, like Kubernetes' MilliValue); the scheduler keeps amounts in int64 arrays.
MAX_CANONICAL = 2**63 - 1

#: Resources counted in bytes; every other resource is counted in milli-units.
MEMORY_LIKE_PREFIXES = ("memory", "ephemeral-storage", "hugepages-", "storage")


def parse_quantity(value: object, field: str = "quantity") -> Fraction:
    """Parse a Kubernetes quantity into an exact fraction; raise FieldError naming the field."""
    if isinstance(value, bool):
        raise FieldError(field, f"{reprlib.repr(value)} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise FieldError(field, f"{reprlib.repr(value)} is not a quantity")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise FieldError(field, f"{reprlib.repr(value)} is not a quantity")
    text = value.strip()
    match = _QUANTITY.fullmatch(text) if len(text) <= MAX_QUANTITY_LENGTH else None
    if match is None:
        raise FieldError(field, f"{reprlib.repr(value)} is not a valid quantity (e.g. 500m, 2, 1.5, 10Gi, 1e3)")
    number = Fraction(match["num"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    exponent = int(suffix[1:])
    if abs(exponent) > MAX_EXPONENT:
        raise FieldError(field, f"{reprlib.repr(value)} has an exponent beyond ±{MAX_EXPONENT}")
    return number * Fraction(10) ** exponent


def is_memory_like(resource: str) -> bool:
    """True for resources stored in bytes (memory, storage); False for milli-unit resources."""
    return resource.startswith(MEMORY_LIKE_PREFIXES)


def scale_of(resource: str) -> int:
    """How many canonical integer units make one unit of the resource as users write it."""
    return 1 if is_memory_like(resource) else 1000


def to_canonical(resource: str, value: object, field: str) -> int:
    """A quantity as the canonical integer for its resource, rounded up like Kubernetes' MilliValue."""
    quantity = parse_quantity(value, field) * scale_of(resource)
    if quantity < 0:
        raise FieldError(field, f"{reprlib.repr(value)} is negative")
    amount = math.ceil(quantity)
    if amount > MAX_CANONICAL:
        raise FieldError(field, f"{reprlib.repr(value)} is too large for {resource}")
    return amount


def format_canonical(resource: str, amount: int) -> str:
    """The canonical integer written back exactly, the way a user would: 500m, 4, 1.5, 4Gi, 1536Mi.

    Exact so that a dump loads back to the same amount: memory takes the largest binary suffix that
    divides it (else plain bytes); cpu shows millicores; other resources show up to three decimals.
    """
    if amount < 0:
        return "-" + format_canonical(resource, -amount)
    if is_memory_like(resource):
        for suffix, size in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount and amount % size == 0:
                return f"{amount // size}{suffix}"
        return str(amount)
    whole, milli = divmod(amount, 1000)
    if not milli:
        return str(whole)
    if resource == "cpu":
        return f"{amount}m"
    return f"{whole}.{milli:03d}".rstrip("0")
