"""Node label and taint codes: membership of a handful of codes is compared code by code, not through
np.isin, and says the same."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tidegate.scheduler.labels import FEW_CODES, member

codes = st.lists(st.integers(-1, 12), max_size=60)


@given(codes, st.lists(st.integers(-1, 14), max_size=FEW_CODES + 4), st.booleans())
def test_membership_says_what_isin_says(values: list[int], wanted: list[int], as_set: bool) -> None:
    array = np.array(values, dtype=np.int64)
    asked = set(wanted) if as_set else wanted
    found = member(array, asked)
    assert found.dtype == bool and found.shape == array.shape
    assert np.array_equal(found, np.isin(array, list(asked)))
