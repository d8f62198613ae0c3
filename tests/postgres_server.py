"""A throwaway PostgreSQL server for the store's tests: Debian's own server binaries (package postgresql-15,
which `make test` installs when missing), a fresh cluster in a temporary folder, trust authentication on a
loopback port, no fsync. One server a test session; each test gets a database of its own."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

#: Where Debian installs each PostgreSQL version's server programs.
DEBIAN_POSTGRES = Path("/usr/lib/postgresql")
#: A role whose password the server checks (every other role is trusted), with a database of its own of that
#: name: for tests of a wrong password.
PASSWORD_USER, PASSWORD = "tidegate_pw", "right-password"


def server_programs() -> Path | None:
    """The newest installed PostgreSQL's bin folder (with initdb and postgres), or None."""
    found = sorted(
        (p for p in DEBIAN_POSTGRES.glob("*/bin") if (p / "postgres").exists() and (p / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    return found[-1] if found else None


def _missing(why: str) -> None:
    """Skip, unless TIDEGATE_REQUIRE_POSTGRES is set (`make test` sets it after installing the server)."""
    message = f"{why}: install Debian's postgresql-15 (make postgres) to run the PostgreSQL store tests"
    if os.environ.get("TIDEGATE_REQUIRE_POSTGRES"):
        pytest.fail(message)
    pytest.skip(message)


def _as_server_user(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as Debian's `postgres` user."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """A running server; yields its SQLAlchemy URL without a database name."""
    programs = server_programs()
    if programs is None:
        _missing(f"no PostgreSQL server under {DEBIAN_POSTGRES}")
    assert programs is not None
    try:
        import psycopg
    except ImportError:
        _missing("the psycopg driver is not installed")
    data = Path(tempfile.mkdtemp(prefix="tidegate-pg-"))
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(data, user.pw_uid, user.pw_gid)
    port = _free_port()
    log = data / "server.log"
    server: subprocess.Popen[bytes] | None = None
    try:
        cluster = data / "cluster"
        initdb = [str(programs / "initdb"), "-D", str(cluster), "-U", "postgres", "--auth=trust", "-E", "UTF8"]
        subprocess.run(_as_server_user(initdb), check=True, capture_output=True)
        hba = cluster / "pg_hba.conf"  # the first matching line wins: PASSWORD_USER's password is checked
        hba.write_text(f"host all {PASSWORD_USER} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        with log.open("wb") as out:
            server = subprocess.Popen(
                _as_server_user(
                    [
                        str(programs / "postgres"),
                        "-D", str(cluster),
                        "-p", str(port),
                        "-k", str(data),
                        "-c", "listen_addresses=127.0.0.1",
                        "-c", "fsync=off",
                    ]
                ),
                stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname=postgres").close()
                break
            except psycopg.OperationalError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"PostgreSQL did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.1)
        with psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname=postgres", autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {PASSWORD_USER} LOGIN PASSWORD '{PASSWORD}'")
            conn.execute(f"CREATE DATABASE {PASSWORD_USER} OWNER {PASSWORD_USER}")
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/"
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        shutil.rmtree(data, ignore_errors=True)


def new_database(server_url: str) -> str:
    """A new empty database on the server; its SQLAlchemy URL."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    port = server_url.rsplit(":", 1)[1].rstrip("/")
    with psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname=postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server_url + name
