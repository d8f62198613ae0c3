"""Kubernetes quantities: parsing, canonical units and writing them back."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.model.errors import FieldError
from tidegate.model.quantity import (
    MAX_CANONICAL,
    format_canonical,
    is_memory_like,
    parse_quantity,
    scale_of,
    to_canonical,
)
from tidegate.model.resources import Resources


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2048", Fraction(2048)),
        ("500m", Fraction(1, 2)),
        ("4096Gi", Fraction(4096 * 2**30)),
        ("1.5", Fraction(3, 2)),
        ("10Gi", Fraction(10 * 2**30)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("1e-3", Fraction(1, 1000)),
        ("1E", Fraction(10**18)),  # E alone is the exa suffix
        ("2k", Fraction(2000)),
        ("3M", Fraction(3 * 10**6)),
        ("1Ki", Fraction(1024)),
        ("1.5Mi", Fraction(3 * 2**19)),
        (".5", Fraction(1, 2)),
        ("1.", Fraction(1)),
        ("+4", Fraction(4)),
        ("100n", Fraction(1, 10**7)),
        ("7u", Fraction(7, 10**6)),
        (" 8 ", Fraction(8)),
        (12, Fraction(12)),
        (0.25, Fraction(1, 4)),
        (0.1, Fraction(1, 10)),  # a YAML float is read through its decimal text, exactly
    ],
)
def test_parse_quantity_accepts_kubernetes_syntax(text: object, expected: Fraction) -> None:
    assert parse_quantity(text, "f") == expected


@pytest.mark.parametrize(
    "bad",
    ["", "abc", "1.2.3", "1e", "Gi", "1 Gi", "1_000", "1Gb", "0x10", "1e3Gi", "--1", None, True, [], {}, float("nan")],
)
def test_parse_quantity_rejects_bad_values_naming_the_field(bad: object) -> None:
    with pytest.raises(FieldError) as info:
        parse_quantity(bad, "spec.capability.cpu")
    assert info.value.field == "spec.capability.cpu"
    assert str(info.value).startswith("spec.capability.cpu: ")


def test_huge_exponent_is_rejected_instead_of_computed() -> None:
    # 10**999999999 in exact arithmetic would take minutes and gigabytes.
    with pytest.raises(FieldError, match="exponent") as info:
        parse_quantity("1e999999999", "spec.capability.cpu")
    assert info.value.field == "spec.capability.cpu"


def test_very_long_number_is_a_field_error_not_a_bare_value_error() -> None:
    # Python refuses int("9" * 5000); that must not escape without the field.
    with pytest.raises(FieldError) as info:
        parse_quantity("9" * 5000, "spec.capability.cpu")
    assert info.value.field == "spec.capability.cpu"
    assert len(str(info.value)) < 200  # the value is abbreviated in the message


@pytest.mark.parametrize(
    ("resource", "text", "canonical"),
    [
        ("cpu", "500m", 500),
        ("cpu", "2048", 2_048_000),
        ("cpu", "0.1m", 1),  # rounded up like Kubernetes' MilliValue
        ("memory", "4096Gi", 4096 * 2**30),
        ("memory", "0.5", 1),
        ("memory", "1e3", 1000),
        ("nvidia.com/gpu", "128", 128_000),
        ("nvidia.com/gpu", "256", 256_000),
        ("volcano.sh/gpu-memory", "4096", 4_096_000),
        ("ephemeral-storage", "10Gi", 10 * 2**30),
        ("hugepages-2Mi", "4Mi", 4 * 2**20),
        ("pods", "110", 110_000),
    ],
)
def test_to_canonical_units(resource: str, text: str, canonical: int) -> None:
    assert to_canonical(resource, text, "f") == canonical


def test_scale_of_memory_like_and_milli_resources() -> None:
    assert is_memory_like("memory") and is_memory_like("hugepages-1Gi") and is_memory_like("ephemeral-storage")
    assert not is_memory_like("volcano.sh/gpu-memory")
    assert scale_of("memory") == 1
    assert scale_of("nvidia.com/gpu") == 1000


def test_negative_and_too_large_amounts_are_rejected() -> None:
    with pytest.raises(FieldError, match="negative") as info:
        to_canonical("cpu", "-1", "spec.containers[0].resources.requests.cpu")
    assert info.value.field == "spec.containers[0].resources.requests.cpu"
    with pytest.raises(FieldError, match="too large"):
        to_canonical("nvidia.com/gpu", "1e17", "f")
    assert to_canonical("memory", str(MAX_CANONICAL), "f") == MAX_CANONICAL


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("cpu", 500, "500m"),
        ("cpu", 4000, "4"),
        ("cpu", -1500, "-1500m"),
        ("memory", 4 * 2**30, "4Gi"),
        ("memory", 1536 * 2**20, "1536Mi"),
        ("memory", 2048, "2Ki"),
        ("memory", 2**30 + 1, str(2**30 + 1)),
        ("memory", 0, "0"),
        ("nvidia.com/gpu", 1500, "1.5"),
        ("nvidia.com/gpu", 1_234_567, "1234.567"),
        ("nvidia.com/gpu", 128_000, "128"),
    ],
)
def test_format_canonical_is_exact_and_readable(resource: str, amount: int, text: str) -> None:
    assert format_canonical(resource, amount) == text


@given(st.integers(min_value=0, max_value=MAX_CANONICAL))
def test_format_then_parse_round_trips_milli_resources(amount: int) -> None:
    for resource in ("cpu", "nvidia.com/gpu"):
        assert to_canonical(resource, format_canonical(resource, amount), "f") == amount


@given(st.integers(min_value=0, max_value=2**62))
def test_format_then_parse_round_trips_memory(amount: int) -> None:
    assert to_canonical("memory", format_canonical("memory", amount), "f") == amount


def test_resources_parse_names_the_field_of_a_bad_quantity() -> None:
    with pytest.raises(FieldError) as info:
        Resources.parse({"nvidia.com/gpu": "lots"}, "spec.capability")
    assert info.value.field == "spec.capability[nvidia.com/gpu]"


def test_resources_drop_zeros_unless_asked_to_keep_them() -> None:
    # A queue's capability keeps a declared 0 (`nvidia.com/gpu in capability` is then True); it is then a
    # different value from the empty list, and arithmetic on it drops the zero again.
    dropped = Resources.parse({"nvidia.com/gpu": "0", "cpu": "2"}, "f")
    kept = Resources.parse({"nvidia.com/gpu": "0", "cpu": "2"}, "f", keep_zeros=True)
    assert "nvidia.com/gpu" not in dropped and "nvidia.com/gpu" in kept
    assert kept["nvidia.com/gpu"] == dropped["nvidia.com/gpu"] == 0
    assert kept != dropped and hash(kept) != hash(dropped)
    assert kept == Resources({"nvidia.com/gpu": 0, "cpu": 2000}, keep_zeros=True)
    assert hash(kept) == hash(Resources({"cpu": 2000, "nvidia.com/gpu": 0}, keep_zeros=True))
    assert kept.to_dict() == {"cpu": "2", "nvidia.com/gpu": "0"}
    assert kept + Resources() == dropped
