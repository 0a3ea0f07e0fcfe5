"""The browser-test harness: a live daphne server, a scripted LLM endpoint, Playwright helpers.

``tests/browser/conftest.py`` turns these into fixtures; page tests import the
helpers (``login``, ``screenshot``, ``open_socket``) from here.

* ``LiveApp``: daphne serving ``oam_site.asgi:application`` on 127.0.0.1 (a
  port the OS picks, read back from daphne's log), on a SQLite file and a var
  directory of its own, with the in-process Dramatiq broker, the embedded
  worker and the in-memory channel layer, so extraction runs inside the
  server process and its WebSocket events never leave it. ``python(code)`` and
  ``manage(...)`` run code against the same database in a subprocess with the
  server's environment; ``api(...)`` calls its JSON API with the seeded key.
* ``ScriptedLlmServer``: an OpenAI-compatible chat-completions endpoint in the
  test process whose replies follow the request's JSON schema (extraction,
  summary, relation judge), so extraction through the server is deterministic
  and instant. Tests can replace replies (``handler``) or slow them (``delay``).
* ``login``/``screenshot``/``open_socket``: log in through a form, save a
  full-page PNG under ``test-artifacts/screenshots/``, watch a WebSocket from
  page JavaScript.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from memory.dev.postgres_server import fresh_database

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"

#: Debian's Chromium (``apt-get install chromium``; ``make chromium``). Playwright's own
#: browser download cannot reach its CDN here, so the system build is launched instead.
CHROMIUM = os.environ.get("OAM_CHROMIUM", "/usr/bin/chromium")
#: Flags for a browser in CI: no sandbox (root in CI), no GPU, no network chatter of Chromium's own.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

#: Environment variables of the test process that must not reach the live server: it runs the
#: embedded default (SQLite file, in-process broker, in-memory channel layer) and gets its LLM
#: from the harness only.
_SERVER_ENV_DROP = ("OAM_REDIS_URL", "OAM_DRAMATIQ_BROKER_URL", "OAM_ORACLE_DSN", "OAM_LLM_BASE_URL",
                    "OAM_LLM_MODEL", "OAM_LLM_API_KEY", "OAM_SQLITE_TEST_PATH", "DJANGO_SETTINGS_MODULE")


class LiveAppError(RuntimeError):
    """The live server or a command against its database failed; the message carries the output."""


# --- the scripted LLM endpoint -------------------------------------------------------------------

_TARGET_LINE = re.compile(r"^\[(?P<ref>m\d+)\](?: \([^)]*\))? (?P<role>[^:\n]+): (?P<text>.*)$", re.MULTILINE)


def minimal_instance(schema: dict) -> Any:
    """Return the smallest value that satisfies a simple JSON schema (objects, arrays, enums, strings...)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: minimal_instance(props.get(name, {})) for name in schema.get("required", [])}
    if kind == "array":
        return [minimal_instance(schema.get("items", {})) for _ in range(schema.get("minItems", 0))]
    if kind == "string":
        return "x" * max(1, schema.get("minLength", 1))
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return None


def scripted_reply(body: dict) -> Any:
    """The reply the scripted LLM gives to one chat-completions request body (a JSON value, or text).

    * ``extracted_memories`` (``memory.llm.prompts.SCHEMA_NAME``): one ``fact``
      per TARGET message of the prompt, ``"<role> said: <text>"`` cut to the
      schema's length, citing that message;
    * ``thread_summary``: ``{"summary": "Scripted summary of N lines.", "topics": ["scripted topic"]}``;
    * ``memory_relation``: ``{"relation": "unrelated"}`` (every candidate is new);
    * any other schema: its ``minimal_instance``; no schema: the text ``"scripted reply"``.
    """
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        name, schema = response_format["json_schema"].get("name"), response_format["json_schema"]["schema"]
    elif response_format.get("type") == "json_object" and response_format.get("schema"):
        name, schema = None, response_format["schema"]
    else:
        return "scripted reply"
    prompt = "\n".join(m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "user")
    props = schema.get("properties", {})
    if name == "extracted_memories" or ("memories" in props and name is None):
        item = props["memories"]["items"]["properties"]
        refs = set(item["source_message_ids"]["items"]["enum"])
        limit = item["content"].get("maxLength", 200)
        memories = [
            {"memory_type": "fact", "content": f"{m['role'].strip()} said: {m['text'].strip()}"[:limit],
             "source_message_ids": [m["ref"]]}
            for m in _TARGET_LINE.finditer(prompt) if m["ref"] in refs
        ]
        return {"memories": memories[: props["memories"].get("maxItems", len(memories))]}
    if name == "thread_summary" or set(props) == {"summary", "topics"}:
        return {"summary": f"Scripted summary of {len(prompt.splitlines())} lines.", "topics": ["scripted topic"]}
    if name == "memory_relation" or set(props) == {"relation"}:
        return {"relation": "unrelated"}
    return minimal_instance(schema)


@dataclass
class ScriptedLlmServer:
    """A stdlib HTTP server on 127.0.0.1 answering ``POST .../chat/completions`` with ``scripted_reply``.

    ``handler(body) -> value`` replaces ``scripted_reply`` (a dict/list is sent
    as JSON text, a str as it is); ``delay`` seconds are slept before each
    answer; ``requests`` keeps every request body. ``base_url`` ends in ``/v1``. ``port``: 0 (any free
    port) or one to bind, e.g. a stopped server's, to bring an LLM back at its address.
    """

    handler: Callable[[dict], Any] | None = None
    delay: float = 0.0
    requests: list[dict] = field(default_factory=list)
    base_url: str = ""
    model: str = "scripted"
    port: int = 0
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def start(self) -> "ScriptedLlmServer":
        state = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                state.requests.append(body)
                if state.delay:
                    time.sleep(state.delay)
                try:
                    value = (state.handler or scripted_reply)(body)
                    content = value if isinstance(value, str) else json.dumps(value)
                    status, payload = 200, {
                        "id": f"chatcmpl-{len(state.requests)}", "object": "chat.completion",
                        "created": int(time.time()), "model": body.get("model", state.model),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": content}}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
                    }
                except Exception as exc:  # noqa: BLE001 - a broken script answers 500, visibly
                    status, payload = 500, {"error": {"message": f"scripted LLM failed: {exc!r}"}}
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up
                    pass

            def log_message(self, format, *args):  # keep pytest output clean
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="scripted-llm", daemon=True)
        self._thread.start()
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = None


# --- the live server -------------------------------------------------------------------------------

_BOOT = (
    "import json, os, django\n"
    "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'oam_site.settings')\n"
    "django.setup()\n"
    "from tests.ids import key  # stored ids of the default project (memory.records.tenancy)\n"
    "result = None\n"
)
_RESULT_MARK = "@@oam-live-app-result@@"


@dataclass
class LiveApp:
    """A running daphne server and what the seed put in its database.

    ``url``: ``http://127.0.0.1:<port>`` (no trailing slash). ``seed``: the JSON
    ``tests.browser.seed`` printed (``thread_id``, ``thread_ids``,
    ``message_ids``, ``memory_ids``, ``relation_ids``, ``api_key``, ``staff``,
    ``viewer``). ``llm``: the ``ScriptedLlmServer`` the server extracts with,
    or None (``OAM_BROWSER_LLM=local`` or ``none``). ``llm_mode``: "scripted",
    "local" or "none".
    """

    url: str
    env: dict[str, str] = field(repr=False)
    directory: Path
    log_path: Path
    process: subprocess.Popen = field(repr=False)
    seed: dict[str, Any] = field(repr=False)  # holds the raw API key
    llm: ScriptedLlmServer | None = field(repr=False)
    llm_mode: str

    @property
    def ws_url(self) -> str:
        """``ws://127.0.0.1:<port>``."""
        return "ws" + self.url[len("http"):]

    @property
    def db_path(self) -> Path:
        """The server's SQLite file."""
        return Path(self.env["OAM_SQLITE_PATH"])

    @property
    def staff(self) -> tuple[str, str]:
        """(username, password) of the seeded superuser."""
        return tuple(self.seed["staff"])

    @property
    def viewer(self) -> tuple[str, str]:
        """(username, password) of the seeded active user who is not staff."""
        return tuple(self.seed["viewer"])

    def log_tail(self, chars: int = 6000) -> str:
        """The end of the server's stdout and stderr."""
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def python(self, code: str, timeout: float = 180) -> Any:
        """Run ``code`` in a fresh Django process on the server's database; return its ``result`` variable.

        ``result`` must be JSON-serialisable (it starts as None). Raises
        ``LiveAppError`` with the output when the code fails. Each call starts
        Python and Django (about 2 s; more if it embeds).
        """
        script = _BOOT + code + f"\nprint({_RESULT_MARK!r} + json.dumps(result, default=str))\n"
        proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        marked = [line for line in proc.stdout.splitlines() if line.startswith(_RESULT_MARK)]
        if proc.returncode != 0 or not marked:
            raise LiveAppError(f"live_app.python failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n"
                               f"{proc.stderr[-6000:]}")
        return json.loads(marked[-1][len(_RESULT_MARK):])

    def manage(self, *args: str, timeout: float = 300) -> str:
        """Run ``manage.py <args>`` on the server's database; return stdout. ``LiveAppError`` on failure."""
        proc = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise LiveAppError(f"manage.py {' '.join(args)} failed (exit {proc.returncode}):\n"
                               f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
        return proc.stdout

    def api(self, method: str, path: str, payload: Any = None, *, key: str | None = None,
            timeout: float = 120) -> tuple[int, Any]:
        """Call the JSON API (``path`` under ``/api``) with the seeded key; return (status, decoded body or None)."""
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(f"{self.url}/api{path}", data=data, method=method, headers={
            "Authorization": f"Bearer {self.seed['api_key'] if key is None else key}",
            "Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, body = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read()
        return status, json.loads(body) if body else None

    def get(self, path: str, timeout: float = 30) -> tuple[int, dict[str, str], bytes]:
        """Plain anonymous GET of ``path``; return (status, headers lower-cased, body). Redirects are not followed."""

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):
                return None

        opener = urllib.request.build_opener(NoRedirect)
        try:
            with opener.open(f"{self.url}{path}", timeout=timeout) as response:
                return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()

    def has_path(self, path: str) -> bool:
        """True when an anonymous GET of ``path`` is not a 404 (e.g. is the staff app mounted yet?)."""
        return self.get(path)[0] != 404


def server_env(directory: Path, *, llm_base_url: str = "", llm_model: str = "") -> dict[str, str]:
    """The live server's environment: the test process's, pointed at ``directory``, embedded services only; on
    the PostgreSQL pass (``OAM_DATABASE_URL`` set) a new empty database of its own on the same server."""
    env = {k: v for k, v in os.environ.items() if k not in _SERVER_ENV_DROP}
    env.update({
        "DJANGO_SETTINGS_MODULE": "oam_site.settings",
        "DJANGO_DEBUG": "false",
        "DJANGO_LOG_LEVEL": "INFO",  # the server's log records in test-artifacts/browser/daphne.log
        "OAM_VAR_DIR": str(directory),  # STATIC_ROOT = <directory>/static
        "OAM_SQLITE_PATH": str(directory / "oam.sqlite3"),
        "OAM_EMBEDDED_WORKER": "true",
        "OAM_EXTRACTION_SWEEP_SECONDS": "0",  # the sweep runs once, at worker boot
        "PYTHONUNBUFFERED": "1",
    })
    if env.get("OAM_DATABASE_URL"):  # the PostgreSQL pass: a database of its own, as the SQLite pass has a file
        name = "live_" + hashlib.sha256(str(directory).encode()).hexdigest()[:16]
        env["OAM_DATABASE_URL"] = fresh_database(env["OAM_DATABASE_URL"], name)
    if llm_base_url:
        env.update({"OAM_LLM_BASE_URL": llm_base_url, "OAM_LLM_MODEL": llm_model or "scripted",
                    "OAM_LLM_TIMEOUT": "120"})
    return env


def run_seed(env: dict[str, str], sample: str, timeout: float = 600) -> dict[str, Any]:
    """Run ``python -m tests.browser.seed`` with ``env``; return the JSON it prints. ``LiveAppError`` on failure."""
    seed_env = {k: v for k, v in env.items() if not k.startswith("OAM_LLM_")}  # no extraction while seeding
    proc = subprocess.run([sys.executable, "-m", "tests.browser.seed", "--sample", sample], cwd=ROOT, env=seed_env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise LiveAppError(f"seeding the live server's database failed (exit {proc.returncode}):\n"
                           f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


#: The line ``python -m oam_site.serve`` (what ``make serve`` runs) prints once it answers.
READY = re.compile(r"^OAM Site ready on http://127\.0\.0\.1:(\d+)$", re.MULTILINE)


def migrate_with_key(env: dict[str, str], name: str) -> str:
    """Migrate the live server's database (``env``) and make an API key named ``name`` in the default project;
    return the key."""
    for args in (["migrate", "-v0"], ["create_api_key", name]):
        out = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
                             text=True, check=True, timeout=300).stdout
    return re.search(r"[A-Za-z0-9_-]{40,}", out)[0]


def start_daphne(env: dict[str, str], log_path: Path, timeout: float = 120) -> tuple[subprocess.Popen, str]:
    """Start daphne as ``make serve`` does (``python -m oam_site.serve``) on 127.0.0.1, a free port, in its
    own process group; return (process, base URL).

    Waits for its ready line (``READY``, with the port) and for ``/admin/login/`` to answer 200.
    Raises ``LiveAppError`` with the log (after stopping it) when it does not.
    """
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "oam_site.serve", "-b", "127.0.0.1", "-p", "0", "oam_site.asgi:application"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    url, last_error = None, None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        if url is None:
            found = READY.search(log_path.read_text(errors="replace"))
            url = f"http://127.0.0.1:{found[1]}" if found else None
        if url is not None:
            try:
                with urllib.request.urlopen(f"{url}/admin/login/", timeout=10) as response:
                    if response.status == 200:
                        return process, url
            except (OSError, urllib.error.URLError) as exc:
                last_error = exc
        time.sleep(0.2)
    stop_process(process)
    raise LiveAppError(f"daphne did not start (exit {process.returncode}, last error {last_error!r}); log:\n"
                       f"{log_path.read_text(errors='replace')[-6000:]}")


def stop_process(process: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM the process group, then SIGKILL it after ``timeout`` seconds."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    except ProcessLookupError:
        pass


# --- Playwright helpers ------------------------------------------------------------------------------


def screenshot(page, name: str, *, full_page: bool = True) -> Path:
    """Save a PNG of ``page`` as ``test-artifacts/screenshots/<name>.png`` (git-ignored); return its path.

    ``name`` may hold letters, digits, ``._-``; anything else becomes ``_``.
    """
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{re.sub(r'[^A-Za-z0-9._-]', '_', name)}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


def login(page, base_url: str, username: str, password: str, *, login_path: str = "/staff/login/",
          next_path: str | None = None) -> None:
    """Log in through the form at ``login_path`` (Django's ``LoginView``: staff or admin); wait to leave it.

    Raises ``AssertionError`` with the page's error text when the form comes
    back (wrong password, an account that is not staff).
    """
    target = f"{base_url}{login_path}" + (f"?next={next_path}" if next_path else "")
    page.goto(target)
    form = page.locator("form:has(input[name=password])")
    form.locator("input[name=username]").fill(username)
    form.locator("input[name=password]").fill(password)
    with page.expect_navigation():
        form.locator("[type=submit]").click()
    if page.url.split("?")[0].endswith(login_path):
        errors = page.locator(".errornote, .errorlist, .errors, [role=alert]").all_inner_texts()
        raise AssertionError(f"login as {username!r} at {login_path} failed: {errors or page.content()[:2000]}")


_OPEN_SOCKET_JS = """
([key, url, ms]) => new Promise((resolve) => {
  setTimeout(() => resolve({opened: false, closeCode: null, timedOut: true}), ms);
  const record = {events: [], opened: false, closeCode: null};
  (window.__oamSockets = window.__oamSockets || {})[key] = record;
  const ws = new WebSocket(url);
  record.ws = ws;
  ws.onopen = () => { record.opened = true; resolve({opened: true, closeCode: null}); };
  ws.onmessage = (e) => { record.events.push(JSON.parse(e.data)); };
  ws.onclose = (e) => { record.closeCode = e.code; resolve({opened: record.opened, closeCode: e.code}); };
})
"""


@dataclass
class BrowserSocket:
    """A WebSocket opened by page JavaScript; its JSON frames collect in ``window.__oamSockets[key]``."""

    page: Any
    key: str
    opened: bool
    close_code: int | None

    def events(self) -> list[dict]:
        """Every frame received so far, decoded."""
        return self.page.evaluate("(key) => window.__oamSockets[key].events", self.key)

    def wait_for(self, event: str, timeout: float = 60) -> dict:
        """Wait until a frame with ``"event": event`` has arrived; return the first such frame."""
        self.page.wait_for_function(
            "([key, name]) => window.__oamSockets[key].events.some((e) => e.event === name)",
            arg=[self.key, event], timeout=timeout * 1000)
        return next(e for e in self.events() if e.get("event") == event)

    def close(self) -> None:
        """Close it from the page."""
        self.page.evaluate("(key) => window.__oamSockets[key].ws.close()", self.key)


def open_socket(page, url: str, key: str | None = None, timeout: float = 30) -> BrowserSocket:
    """Open ``url`` (``ws://...``) from ``page``'s JavaScript (it sends the page's cookies); wait for open or close.

    ``opened`` is False when the handshake was refused (the browser reports
    close code 1006 then). ``AssertionError`` when neither happens within ``timeout`` seconds.
    """
    key = key or url
    state = page.evaluate(_OPEN_SOCKET_JS, [key, url, int(timeout * 1000)])
    if state.get("timedOut"):
        raise AssertionError(f"WebSocket {url} neither opened nor closed within {timeout} s")
    return BrowserSocket(page=page, key=key, opened=state["opened"], close_code=state["closeCode"])
