"""``python -m oam_site.serve``: daphne's command line, plus one clear line once the server answers.

It takes daphne's own arguments (``-b HOST -p PORT oam_site.asgi:application``;
``make serve`` runs it) and, when the reactor runs with every endpoint
listening, prints::

    OAM Site ready on http://HOST:PORT

one line per TCP endpoint, with the port the OS gave for ``-p 0``. daphne's
own "Listening on TCP address" line is an INFO log record, which the
project's logging settings (``DJANGO_LOG_LEVEL``, default WARNING) hide.

Before daphne starts it runs Django's system checks with the database ones
(``manage.py check --database default``): a database that cannot be reached,
has no pgvector, or holds vectors of another size (``memory.E002``,
``memory.E004``-``E006``) stops the start with the check's message and exit
status 1, instead of a server that answers 500 to every request.
"""

from __future__ import annotations

import io
import os
import sys

from daphne.cli import CommandLineInterface
from daphne.server import Server  # installs Twisted's asyncio reactor: before any other Twisted import


def ready_line(host: str, port: int) -> str:
    """``OAM Site ready on http://HOST:PORT`` (an IPv6 host in brackets)."""
    return f"OAM Site ready on http://{f'[{host}]' if ':' in host else host}:{port}"


class ReadyServer(Server):
    """daphne's ``Server`` that prints ``ready_line`` for each TCP endpoint once the reactor runs."""

    def listen_success(self, port):
        """daphne's bookkeeping, then the ready line as soon as the reactor serves (now, if it already does)."""
        super().listen_success(port)
        host = getattr(port, "getHost", lambda: None)()
        if hasattr(host, "host") and hasattr(host, "port"):
            from twisted.internet import reactor  # deferred: importing it installs a reactor; daphne installs its own

            reactor.callWhenRunning(print, ready_line(host.host, host.port), flush=True)


class ReadyCommandLine(CommandLineInterface):
    """daphne's command line running ``ReadyServer``."""

    server_class = ReadyServer


def check_database() -> None:
    """Django's system checks, database ones included; ``SystemExit`` with their report when one fails."""
    import django  # deferred: daphne's reactor (imported above) must come first; settings load here
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oam_site.settings")  # as oam_site.asgi does
    django.setup()
    try:
        call_command("check", databases=["default"], stdout=io.StringIO())  # quiet unless a check fails
    except SystemCheckError as exc:
        raise SystemExit(str(exc)) from None


def main(argv: list[str] | None = None) -> None:
    """Check the configuration, then run daphne with ``argv`` (default: this process's arguments)."""
    check_database()
    ReadyCommandLine().run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
