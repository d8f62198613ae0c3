"""Durable state of the live control plane: what it accepted, kept in a SQL database (SQLite by default)."""

from tidegate.store.sql import Batch, EventRow, JobState, PodState, Saved, Store, StoredJob, StoreError, Writer

__all__ = ["Batch", "EventRow", "JobState", "PodState", "Saved", "Store", "StoreError", "StoredJob", "Writer"]
