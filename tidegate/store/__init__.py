"""Durable state of the live control plane: what it accepted, kept in a SQL database (SQLite by default).

`tidegate.store.records` holds the plain values it keeps; `tidegate.store.sql.Store` the database
(it imports SQLAlchemy, so it is imported where a store is opened, not here).
"""

from tidegate.store.records import Batch, EventRow, JobState, PodState, Saved, StoredJob, StoreError

__all__ = ["Batch", "EventRow", "JobState", "PodState", "Saved", "StoreError", "StoredJob"]
