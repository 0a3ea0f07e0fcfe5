"""A llama.cpp server that dies after it started is reported with its exit code and log.

A build that uses instructions the CPU lacks answers ``GET /v1/models`` and then dies
with SIGILL on its first completion; the tests only showed "Connection refused". Here
a stand-in for ``python -m llama_cpp.server`` (a small script run by ``python=``)
answers ``/v1/models``, writes a line to its log like ggml would, and kills itself
with SIGILL on the first ``POST``, or after ``FAKE_LLAMA_DIE_AFTER`` seconds.
"""

from __future__ import annotations

import functools
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from memory.dev.llm_server import LlmServerError, describe_exit, free_port, local_llm_server
from tests.conftest import alive

FAKE_SERVER = textwrap.dedent(
    """\
    #!{python}
    import json, os, signal, sys, threading, time
    from http.server import BaseHTTPRequestHandler, HTTPServer

    port = int(sys.argv[sys.argv.index("--port") + 1])

    def die():
        print("ggml_cpu: illegal instruction in the matmul kernel (fake)", flush=True)
        os.kill(os.getpid(), signal.SIGILL)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({{"data": [{{"id": "smollm2-135m-instruct"}}]}}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            die()

        def log_message(self, *args):
            pass

    if os.environ.get("FAKE_LLAMA_DIE_AFTER"):
        threading.Timer(float(os.environ["FAKE_LLAMA_DIE_AFTER"]), die).start()
    print(f"fake llama.cpp server listening pid={{os.getpid()}}", flush=True)
    HTTPServer(("127.0.0.1", port), Handler).serve_forever()
    """
)


@pytest.fixture
def fake_python(tmp_path):
    """An executable that stands in for ``python`` in ``python -m llama_cpp.server ...``."""
    path = tmp_path / "fake-python"
    path.write_text(FAKE_SERVER.format(python=sys.executable))
    path.chmod(0o755)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    return path, model


def test_describe_exit_names_the_signal_and_what_sigill_means():
    assert describe_exit(0) == "code 0"
    assert describe_exit(3) == "code 3"
    assert describe_exit(-signal.SIGKILL).startswith("code -9 (SIGKILL")
    sigill = describe_exit(-signal.SIGILL)
    assert sigill.startswith("code -4 (SIGILL: illegal instruction")
    assert "scripts/llama_wheel.sh" in sigill


def test_a_server_that_dies_on_its_first_completion_is_reported(fake_python, tmp_path):
    python, model = fake_python
    log = tmp_path / "server.log"
    with local_llm_server(python=str(python), model_path=model, log_path=log, startup_timeout=30) as server:
        assert server.death_report() is None
        assert alive(server) is server
        request = urllib.request.Request(f"{server.base_url}/chat/completions", data=b"{}", method="POST")
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            urllib.request.urlopen(request, timeout=10)
        server.process.wait(timeout=10)
        report = server.death_report()
        assert report is not None
        assert f"(pid {server.process.pid}) exited with code -4 (SIGILL: illegal instruction" in report
        assert "illegal instruction in the matmul kernel (fake)" in report  # the log's tail
        assert "-m llama_cpp.server" in report and str(log) in report
        with pytest.raises(Exception, match="SIGILL") as info:  # what the fixtures raise for the next test
            alive(server)
        assert "matmul kernel (fake)" in str(info.value)
    assert log.is_file()  # a log the caller chose is kept


def test_run_local_llm_reports_a_server_that_dies_after_it_started(fake_python, tmp_path, monkeypatch):
    python, model = fake_python
    monkeypatch.setenv("FAKE_LLAMA_DIE_AFTER", "1.0")
    monkeypatch.setattr(
        "memory.management.commands.run_local_llm.local_llm_server",
        functools.partial(local_llm_server, python=str(python)),
    )
    with pytest.raises(CommandError) as info:
        call_command(
            "run_local_llm", port=free_port(), model=str(model), log=str(tmp_path / "run.log"),
            startup_timeout=30, verbosity=0,
        )
    message = str(info.value)
    assert "exited with code -4 (SIGILL: illegal instruction" in message
    assert "illegal instruction in the matmul kernel (fake)" in message
    assert info.value.returncode == 128 + signal.SIGILL  # what a shell reports for a SIGILL death


def test_a_taken_port_is_refused_before_anything_is_called_ready(fake_python, tmp_path):
    python, model = fake_python
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        with pytest.raises(LlmServerError, match=f"127.0.0.1:{port} is already in use"):
            with local_llm_server(python=str(python), model_path=model, port=port, log_path=tmp_path / "l.log"):
                pytest.fail("reported ready on a port another program holds")


PARENT = textwrap.dedent(
    """    import functools, os, sys, time
    sys.path.insert(0, {root!r})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oam_site.settings")
    import django
    django.setup()
    from django.core.management import call_command
    from memory.dev import llm_server
    import memory.management.commands.run_local_llm as command
    command.local_llm_server = functools.partial(llm_server.local_llm_server, python={python!r})
    if sys.argv[1] == "command":
        call_command("run_local_llm", port=llm_server.free_port(), model={model!r}, log={log!r})
    else:
        with llm_server.local_llm_server(python={python!r}, model_path={model!r}, log_path={log!r}):
            print("ready", flush=True)
            time.sleep(600)
    """
)


def _server_pid(log) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines() if log.exists() else ():
            if line.startswith("fake llama.cpp server listening pid="):
                return int(line.rsplit("=", 1)[1])
        time.sleep(0.1)
    raise AssertionError(f"the fake server never started:\n{log.read_text() if log.exists() else ''}")


def _gone(pid: int, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("how", ["command-sigterm", "library-sigkill"])
def test_the_server_does_not_outlive_its_parent(fake_python, tmp_path, how):
    """SIGTERM to ``run_local_llm`` stops the server with it; a SIGKILLed parent takes it along (PDEATHSIG)."""
    python, model = fake_python
    log = tmp_path / "server.log"
    script = tmp_path / "parent.py"
    root = str(Path(__file__).resolve().parents[2])
    script.write_text(PARENT.format(root=root, python=str(python), model=str(model), log=str(log)))
    parent = subprocess.Popen([sys.executable, str(script), how.split("-")[0]], cwd=root,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        server_pid = _server_pid(log)
        time.sleep(0.5)  # ready reported, command waiting on the server
        parent.send_signal(signal.SIGTERM if how == "command-sigterm" else signal.SIGKILL)
        parent.wait(30)
        assert _gone(server_pid), f"the server (pid {server_pid}) outlived its parent ({how})"
    finally:
        if parent.poll() is None:
            parent.kill()
