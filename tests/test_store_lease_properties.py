"""Properties of the store's lease (`tidegate.store.lease`) under random interleavings of three servers on
one SQLite store (hypothesis): each step lets time pass, or has one server ask to hold the lease, write,
crash (it never asks again) or stop cleanly (it releases).

- one at a time: at most one server holds the lease without having to look (renewed within the renew
  period), and only the server the record names can write;
- no takeover from a live holder: a server takes the lease from another only when that one had not
  renewed it for the whole duration;
- a lease left by a crashed holder is taken once a live server has watched it unchanged for the duration.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tidegate.store import StoreError
from tidegate.store.lease import StoreLease
from tidegate.store.sql import Store

DURATION, RENEW = 15.0, 2.0
SERVERS = 3
step = st.one_of(
    st.tuples(st.just("wait"), st.floats(0.0, 8.0)),
    st.tuples(st.sampled_from(["hold", "write", "crash", "stop"]), st.integers(0, SERVERS - 1)),
)


#: s0 holds, stalls; s1 watches the lease unchanged for the duration and takes it; s0 then writes.
STALLED_HOLDER_WRITES = [
    ("hold", 0),
    ("wait", 8.0),
    ("hold", 1),
    ("wait", 8.0),
    ("wait", 8.0),
    ("hold", 1),
    ("write", 0),
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(steps=STALLED_HOLDER_WRITES)
@given(st.lists(step, max_size=60))
def test_one_server_at_a_time_whatever_the_interleaving(steps: list[tuple[str, float]]) -> None:
    now = [0.0]
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'state.db'}"
        stores = [Store(url) for _ in range(SERVERS)]
        leases = [StoreLease(store, f"s{i}", DURATION, RENEW, lambda: now[0]) for i, store in enumerate(stores)]
        alive = [True] * SERVERS
        renewed = [-float("inf")] * SERVERS  # when each last renewed the lease (or took it)
        try:
            for action, value in steps:
                if action == "wait":
                    now[0] += value
                    continue
                i = int(value)
                if not alive[i]:
                    continue
                if action == "hold":
                    before = stores[0].lease_record()
                    if leases[i].hold():
                        previous = before[0] if before is not None else ""
                        if previous and previous != leases[i].identity:  # taken from another
                            j = int(previous[1:])
                            assert now[0] - renewed[j] >= DURATION, f"s{i} took the lease from s{j}, alive"
                        renewed[i] = leases[i]._renewed_at
                elif action == "write":
                    record = stores[0].lease_record()
                    try:
                        with stores[i].write() as writer:
                            writer.mark_started()
                        wrote = True
                    except StoreError:
                        wrote = False
                    if stores[i].holder is not None:  # a server that ever held the lease is fenced
                        assert wrote == (record is not None and record[0] == leases[i].identity)
                elif action == "crash":
                    alive[i] = False
                else:  # a clean stop
                    leases[i].release()
                    alive[i] = False
                fresh = [k for k in range(SERVERS) if leases[k].holding and now[0] - leases[k]._renewed_at < RENEW]
                assert len(fresh) <= 1, f"{fresh} all hold the lease at {now[0]}"
            # a live server that keeps asking gets the lease within the duration once no live one holds it
            live = [k for k in range(SERVERS) if alive[k]]
            if live and not any(leases[k].holding for k in live):
                k = live[0]
                leases[k].hold()
                now[0] += DURATION + 0.001  # (a float sum minus its start can fall a hair short)
                assert leases[k].hold(), "a lease left by crashed servers was never taken over"
        finally:
            for store in stores:
                store.close()
