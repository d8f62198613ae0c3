"""The live control plane's store: what it has accepted, in any database SQLAlchemy reaches.

`tidegate serve` writes through to it so that a restart continues where the last run stopped ("nothing
already accepted is lost"). It keeps plain values, not the model's objects: a job is the text of the
batch it was submitted in (rebuilt by parsing that text again, as a submission is) plus its state
(phase, reason, retries, times, each pod's node, cards and phase, the queue it overflowed to) and its
events; a queue patched live is its current manifest. SQLite (`sqlite:///tidegate.db`) by default;
`postgresql+psycopg://...` or any SQLAlchemy URL works with its driver installed.

Tables: `meta` (schema version, whether a control plane has started on it), `batches` (submitted text
and its file name), `jobs` (one row a job, pods as JSON, in submission order), `events` (appended, one
row an event), `queues` (patched queues' manifests), `pools` (served node pools' nodes and bills),
`controllers` (the budget's period) and `leases` (which server holds the store: `tidegate.store.lease`).
Each `Store.write()` is one transaction; while a server holds the store (`Store.holder`), each one first
checks that it still does, so a server that lost the store to another writes nothing more.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    Connection,
    Double,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    delete,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.sql import ColumnElement

from tidegate.store.records import Batch, EventRow, JobState, PodState, Saved, StoredJob, StoreError

#: Bumped when the tables change; a store written by a newer tidegate is refused rather than misread, an
#: older one is brought up to date (`MIGRATIONS`) when it is opened.
SCHEMA_VERSION = 3
#: The statements that bring a store of version N - 1 to version N (each portable SQL: SQLite and PostgreSQL;
#: a new table needs none, `create_all` makes it).
MIGRATIONS: dict[int, tuple[str, ...]] = {
    2: ("ALTER TABLE jobs ADD COLUMN queue VARCHAR(256) NOT NULL DEFAULT ''",),
    3: (),  # a pod in `jobs.pods` may carry a fifth item, the node it is nominated to (none before)
}

metadata = MetaData()
meta = Table("meta", metadata, Column("name", String(64), primary_key=True), Column("value", Text, nullable=False))
batches = Table(
    "batches",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("file", Text, nullable=False),
    Column("text", Text, nullable=False),
)
jobs = Table(
    "jobs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),  # submission order
    Column("key", String(512), nullable=False, unique=True),
    Column("batch", String(64), nullable=False),
    Column("phase", String(32), nullable=False),
    Column("reason", Text, nullable=False),
    Column("retries", Integer, nullable=False),
    Column("submitted", Double, nullable=False),
    Column("queued_since", Double, nullable=False),
    Column("started", Double),
    Column("finished", Double),
    Column("pods", JSON, nullable=False),
    Column("queue", String(256), nullable=False, server_default=""),  # where it is now ("" from version 1)
)
events = Table(
    "events",
    metadata,
    Column("job", String(512), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("time", Double, nullable=False),
    Column("message", Text, nullable=False),
)
queues = Table("queues", metadata, Column("name", String(256), primary_key=True), Column("manifest", JSON))
#: Node pools served live: their nodes (the cloud pool's come and go), so a restart keeps them.
pools = Table("pools", metadata, Column("name", String(256), primary_key=True), Column("state", JSON, nullable=False))
#: Controllers run live with a state of their own (the budget's period), so a restart resumes them.
controllers = Table(
    "controllers", metadata, Column("name", String(256), primary_key=True), Column("state", JSON, nullable=False)
)
#: Which server holds the store: its identity ("" when released) and a counter its every write bumps.
leases = Table(
    "leases",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("holder", String(256), nullable=False),
    Column("seq", Integer, nullable=False),
)
#: The first bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"
#: The one lease a store has (the table leaves room for more).
LEASE = "control-plane"
#: A lease's record: its holder and counter (what a candidate watches for change).
LeaseRecord = tuple[str, int]


class Writer:
    """The changes of one transaction (see `Store.write`)."""

    def __init__(self, connection: Connection) -> None:
        self._conn = connection

    def add_batch(self, batch: Batch) -> None:
        self._conn.execute(insert(batches).values(id=batch.id, file=batch.file, text=batch.text))

    def put_job(self, state: JobState, new_events: Sequence[EventRow] = ()) -> None:
        """Insert or update the job's row and append its new events."""
        _upsert(self._conn, jobs, jobs.c.key == state.key, _job_values(state), {"key": state.key})
        if new_events:
            rows = [{"job": state.key, "seq": seq, "time": when, "message": text} for seq, when, text in new_events]
            self._conn.execute(insert(events), rows)

    def delete_job(self, key: str) -> None:
        """Forget the job, its events, and its batch once no job of the batch is left."""
        batch = self._conn.execute(select(jobs.c.batch).where(jobs.c.key == key)).scalar_one_or_none()
        self._conn.execute(delete(events).where(events.c.job == key))
        self._conn.execute(delete(jobs).where(jobs.c.key == key))
        if batch is not None and self._conn.execute(select(jobs.c.id).where(jobs.c.batch == batch)).first() is None:
            self._conn.execute(delete(batches).where(batches.c.id == batch))

    def put_queue(self, name: str, manifest: Mapping[str, Any]) -> None:
        _upsert(self._conn, queues, queues.c.name == name, {"manifest": dict(manifest)}, {"name": name})

    def put_pool(self, name: str, state: Mapping[str, Any]) -> None:
        _upsert(self._conn, pools, pools.c.name == name, {"state": dict(state)}, {"name": name})

    def put_controller(self, name: str, state: Mapping[str, Any]) -> None:
        _upsert(self._conn, controllers, controllers.c.name == name, {"state": dict(state)}, {"name": name})

    def drop_queue(self, name: str) -> None:
        self._conn.execute(delete(queues).where(queues.c.name == name))

    def mark_started(self) -> None:
        """A control plane has started on this store: from now on its state, not the folder's jobs, counts."""
        _upsert(self._conn, meta, meta.c.name == "started", {"value": "yes"}, {"name": "started"})


class Store:
    """A database holding one control plane's state. Thread-safe: each `write()` takes its own connection."""

    def __init__(self, url: str) -> None:
        """Check the URL and its driver; the database is reached (and its tables made) at the first use,
        so a control plane that refuses its folder leaves no database behind."""
        self.url = url
        self._ready = False
        #: The identity this process holds the store's lease as (`tidegate.store.lease`): set, every write
        #: first checks it still does. None: writes are not fenced (one process, tests, tools).
        self.holder: str | None = None
        try:
            self.engine: Engine = create_engine(url)
        except (ArgumentError, NoSuchModuleError, ImportError) as exc:
            raise StoreError(f"store {self.where}: {exc}") from exc

    @property
    def where(self) -> str:
        """The URL with any password hidden: what to print."""
        try:
            return make_url(self.url).render_as_string(hide_password=True)
        except ArgumentError:
            return self.url

    def load(self) -> Saved | None:
        """The stored state, or None if no control plane has started on this store yet."""
        try:
            self._prepare()
            return self._load()
        except SQLAlchemyError as exc:
            raise StoreError(f"store {self.where}: {_reason(exc)}") from exc

    def _load(self) -> Saved | None:
        with self.engine.connect() as conn:
            if conn.execute(select(meta.c.value).where(meta.c.name == "started")).first() is None:
                return None
            by_job: dict[str, list[tuple[float, str]]] = {}
            for row in conn.execute(select(events).order_by(events.c.job, events.c.seq)):
                by_job.setdefault(row.job, []).append((row.time, row.message))
            return Saved(
                batches={row.id: Batch(row.id, row.file, row.text) for row in conn.execute(select(batches))},
                jobs=[
                    StoredJob(_job_state(row), tuple(by_job.get(row.key, ())))
                    for row in conn.execute(select(jobs).order_by(jobs.c.id))
                ],
                queues={row.name: dict(row.manifest) for row in conn.execute(select(queues))},
                pools={row.name: dict(row.state) for row in conn.execute(select(pools))},
                controllers={row.name: dict(row.state) for row in conn.execute(select(controllers))},
            )

    @contextmanager
    def write(self) -> Iterator[Writer]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        with self._transaction() as conn:
            if self.holder is not None and not self._bump(conn, self.holder):
                raise StoreError(f"store {self.where}: this server no longer holds it (another took it over)")
            yield Writer(conn)

    @contextmanager
    def _transaction(self, conflicts: bool = False) -> Iterator[Connection]:
        """A connection in a transaction; database errors raise StoreError (an IntegrityError itself with
        `conflicts`, for the caller to take as a lost race)."""
        try:
            self._prepare()
            with self.engine.begin() as conn:
                yield conn
        except SQLAlchemyError as exc:
            if conflicts and isinstance(exc, IntegrityError):
                raise
            raise StoreError(f"store {self.where}: {_reason(exc)}") from exc

    # -- the lease (see tidegate.store.lease) ----------------------------------------------------------
    def lease_record(self) -> LeaseRecord | None:
        """The lease's holder and counter, or None if no server ever held the store."""
        with self._transaction() as conn:
            row = conn.execute(select(leases.c.holder, leases.c.seq).where(leases.c.name == LEASE)).first()
        return None if row is None else (row.holder, row.seq)

    def claim_lease(self, holder: str, seen: LeaseRecord | None) -> bool:
        """Take the lease as `holder` if its record is still `seen` (None: no record yet); False if another
        server changed it first."""
        try:
            with self._transaction(conflicts=True) as conn:
                if seen is None:
                    conn.execute(insert(leases).values(name=LEASE, holder=holder, seq=0))
                    return True
                taken = conn.execute(
                    update(leases)
                    .where(leases.c.name == LEASE, leases.c.holder == seen[0], leases.c.seq == seen[1])
                    .values(holder=holder, seq=leases.c.seq + 1)
                )
                return bool(taken.rowcount == 1)
        except IntegrityError:
            return False  # another server made the record first

    def renew_lease(self, holder: str) -> bool:
        """Bump the lease's counter if `holder` holds it (False: it does not)."""
        with self._transaction() as conn:
            return self._bump(conn, holder)

    def release_lease(self, holder: str) -> None:
        """Give the lease up if `holder` holds it, so the next server need not wait for it to run out."""
        with self._transaction() as conn:
            conn.execute(
                update(leases)
                .where(leases.c.name == LEASE, leases.c.holder == holder)
                .values(holder="", seq=leases.c.seq + 1)
            )

    @staticmethod
    def _bump(conn: Connection, holder: str) -> bool:
        bumped = conn.execute(
            update(leases).where(leases.c.name == LEASE, leases.c.holder == holder).values(seq=leases.c.seq + 1)
        )
        return bool(bumped.rowcount == 1)

    def close(self) -> None:
        self.engine.dispose()

    def _prepare(self) -> None:
        """Make the tables if missing and refuse a newer schema: once, at the first use. A SQLite file that
        cannot be one (a folder, a path in a missing or read-only folder, a file of something else) is
        refused first, naming why (SQLite itself says 'unable to open database file' to all of these)."""
        if self._ready:
            return
        if self.engine.dialect.name == "sqlite":
            problem = _sqlite_problem(self.engine.url.database or "")
            if problem:
                raise StoreError(f"store {self.where}: {problem}")
        metadata.create_all(self.engine)
        with self.engine.begin() as conn:
            self._check_version(conn)
        self._ready = True

    def _check_version(self, conn: Connection) -> None:
        found = conn.execute(select(meta.c.value).where(meta.c.name == "schema_version")).scalar_one_or_none()
        if found is None:
            conn.execute(insert(meta).values(name="schema_version", value=str(SCHEMA_VERSION)))
        elif int(found) > SCHEMA_VERSION:
            raise StoreError(
                f"store {self.where} has schema version {found}; this tidegate reads up to {SCHEMA_VERSION}"
            )
        elif int(found) < SCHEMA_VERSION:
            for version in range(int(found) + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[version]:
                    conn.execute(text(statement))
            conn.execute(update(meta).where(meta.c.name == "schema_version").values(value=str(SCHEMA_VERSION)))


def _reason(exc: SQLAlchemyError) -> str:
    """The database's own words, on one line: its driver's error without SQLAlchemy's statement and link."""
    said = str(getattr(exc, "orig", None) or exc)
    return " ".join(line.strip() for line in said.splitlines() if line.strip()) or type(exc).__name__


def _sqlite_problem(database: str) -> str:
    """Why a SQLite database file at `database` cannot be opened and written, or "" if it can (or it is
    SQLite's in-memory database)."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return ""
    path = Path(database)
    folder = path.parent
    if path.is_dir():
        return f"{path} is a folder, not a SQLite file (name a file in it, e.g. {path / 'tidegate.db'})"
    if not folder.exists():
        return f"the folder {folder} does not exist"
    if not folder.is_dir():
        return f"{folder} is not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable (SQLite writes its journal beside the file)"
    if not path.exists():
        return ""
    if not os.access(path, os.R_OK | os.W_OK):
        return f"{path} is not readable and writable"
    with path.open("rb") as file:
        header = file.read(len(SQLITE_HEADER))
    if header and header != SQLITE_HEADER:
        return f"{path} is not a SQLite database (it does not start with SQLite's header)"
    return ""


def _upsert(
    conn: Connection, table: Table, where: ColumnElement[bool], values: dict[str, Any], key: dict[str, Any]
) -> None:
    """Update the row, or insert it if there is none (portable: no dialect's ON CONFLICT)."""
    if conn.execute(update(table).where(where).values(values)).rowcount == 0:
        conn.execute(insert(table).values(**key, **values))


def _job_values(state: JobState) -> dict[str, Any]:
    return {
        "batch": state.batch,
        "phase": state.phase,
        "reason": state.reason,
        "retries": state.retries,
        "submitted": state.submitted,
        "queued_since": state.queued_since,
        "started": state.started,
        "finished": state.finished,
        "pods": [[pod.key, pod.phase, pod.node, list(pod.gpu_indices), pod.nominated] for pod in state.pods],
        "queue": state.queue,
    }


def _job_state(row: Any) -> JobState:
    pods = tuple(
        PodState(key, phase, node, tuple(cards), *nominated) for key, phase, node, cards, *nominated in row.pods
    )
    return JobState(
        row.key,
        row.batch,
        row.phase,
        row.reason,
        row.retries,
        row.submitted,
        row.queued_since,
        row.started,
        row.finished,
        pods,
        row.queue,
    )
