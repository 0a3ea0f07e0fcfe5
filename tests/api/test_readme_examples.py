"""The README's five-minute walkthrough and the API steps of ``docs/api.md`` run as written, so neither can
drift from the API; so do the README's Python example and the health probes of ``docs/deployment.md``.

The blocks marked ``tested: tests/api/test_readme_examples.py`` (``tests/docs/blocks.py``) are extracted. The
shell blocks, the README's then ``docs/api.md``'s (which continue its session), run top to bottom in one bash
process (``set -euo pipefail``) against a real server started as ``make serve`` starts it
(``python -m oam_site.serve``: its ready line is checked too) on 127.0.0.1, a free port, with a SQLite file of
its own and no LLM. The only edit is the server's address in place of ``http://127.0.0.1:8000``. The blocks run
in a scratch directory holding links to this checkout's ``.venv`` and ``manage.py`` and a ``var/`` of its own,
so their files, their ``createsuperuser`` and their ``create_api_key`` stay out of the repository and its
database.

A ``curl`` shell function placed before the blocks records each call's
arguments, response headers and body; the test then checks every step, in
order, against ``STEPS``: method, path, status and what its JSON must hold.
The Python block runs on the test database.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.browser.harness import ROOT, server_env, start_daphne, stop_process
from tests.docs.blocks import DOCS, README, marked_for

HERE = "tests/api/test_readme_examples.py"
README_BASE = "http://127.0.0.1:8000"
OLD, NEW = "User likes pizza", "User loves pizza, margherita above all"

#: Before the README's blocks: fail on the first error; record every curl call in $CALLS/<nanoseconds>.*
_PRELUDE = r"""set -euo pipefail
curl() {
  local record rc
  record="$CALLS/$(date +%s%N)"
  printf '%s\0' "$@" > "$record.args"
  command curl -D "$record.head" "$@" | tee "$record.body"
  rc=${PIPESTATUS[0]}
  return "$rc"
}
"""


def _uuid(value) -> bool:
    return bool(re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", str(value)))


def _page(count: int, check=lambda items: True):
    """A list answer: exactly ``{"items", "count"}``, ``count`` as given, ``check(items)`` true."""
    return lambda body: set(body) == {"items", "count"} and body["count"] == count and check(body["items"])


def _contents(results: list[dict]) -> list[str]:
    return [r["content"] for r in results]


def _superseded_below_its_replacement(results: list[dict]) -> bool:
    """The default search: the superseded memory is there, ``invalid``, ranked below the one that replaced it."""
    old = next(r for r in results if r["content"] == OLD)
    return old["record"]["status"] == "invalid" and _contents(results).index(NEW) < _contents(results).index(OLD)


def _valid_only(results: list[dict]) -> bool:
    """``include_invalid_results: false``: the replacement, and no invalid record."""
    return NEW in _contents(results) and OLD not in _contents(results) \
        and all(r["record"]["status"] == "valid" for r in results)


def _no_extraction_and_why(body: dict) -> bool:
    """No LLM: extraction is off, and ``reason`` says why (issue #33, friction 5)."""
    return body["enabled"] is False and body["last_message_seq"] >= 2 and "No LLM is configured" in body["reason"]


#: Every HTTP call of the shell blocks, in order: (method, path, status, check of the JSON body or None).
#: ``{T}`` is the thread the walkthrough creates; other ``{...}`` parts match any one path segment.
STEPS = [
    # README: the schema, a thread and its messages
    ("GET", "/api/openapi.json", 200, lambda b: b["info"]["title"] == "OAM Site API"),
    ("POST", "/api/threads", 201, lambda b: _uuid(b["thread_id"]) and b["user_id"] == "u1"
     and b["metadata"] == {"project": "demo"}),
    ("POST", "/api/threads/{T}/messages", 201, lambda b: len(b["ids"]) == 2 and all(map(_uuid, b["ids"]))),
    ("GET", "/api/threads/{T}/messages", 200, _page(2, lambda items: [m["role"] for m in items]
                                                    == ["user", "assistant"])),
    # README: two memories, the newer superseding the older
    ("POST", "/api/threads/{T}/memories", 201, lambda b: b["memory_type"] == "preference" and b["content"] == OLD),
    ("POST", "/api/threads/{T}/memories", 201, lambda b: b["content"] == NEW),
    ("POST", "/api/threads/{T}/links", 201, lambda b: b["relation_type"] == "supersedes"),
    ("GET", "/api/threads/{T}/memories/{id}", 200, lambda b: b["content"] == OLD and b["status"] == "invalid"),
    # README: search with and without invalid records, a context card without them, the extraction state
    ("POST", "/api/threads/{T}/search", 200, _superseded_below_its_replacement),
    ("POST", "/api/threads/{T}/search", 200, _valid_only),
    ("POST", "/api/threads/{T}/context-card", 200, lambda b: len(b["recent_messages"]) == 2
     and len(b["relevant_results"]) <= 3 and "margherita" in b["content"] and OLD not in b["content"]
     and "<status>invalid</status>" not in b["content"]),
    ("GET", "/api/threads/{T}/extraction", 200, _no_extraction_and_why),
    # docs/api.md: threads and messages
    ("GET", "/api/threads/{T}", 200, lambda b: b["agent_id"] == "a1"),
    ("GET", "/api/threads", 200, _page(1, lambda items: items[0]["user_id"] == "u1")),
    ("PATCH", "/api/threads/{T}", 200, lambda b: b["metadata"] == {"project": "demo", "stage": "trial"}),
    ("GET", "/api/threads/{T}/messages/{id}", 200, lambda b: "peanuts" in b["content"]),
    ("PATCH", "/api/threads/{T}/messages/{id}", 200, lambda b: b["metadata"] == {"checked": True}),
    # docs/api.md: memories and links
    ("GET", "/api/threads/{T}/memories", 200, _page(2)),
    ("GET", "/api/threads/{T}/memories/{id}", 200, lambda b: "margherita" in b["content"]),
    ("PATCH", "/api/threads/{T}/memories/{id}", 200, lambda b: b["metadata"] == {"source": "readme"}),
    ("GET", "/api/threads/{T}/links", 200, _page(1, lambda items: items[0]["relation_type"] == "supersedes")),
    ("PATCH", "/api/threads/{T}/links/{id}", 200, lambda b: b["metadata"] == {"why": "more specific"}),
    # docs/api.md: search across threads, the summary
    ("POST", "/api/search", 200, lambda b: b and {r["record_type"] for r in b} == {"message"}
     and any("peanuts" in r["content"] for r in b)),
    ("GET", "/api/threads/{T}/summary", 200, lambda b: "pizza" in b["content"]),
    # docs/api.md: images
    ("POST", "/api/threads/{T}/images", 201, lambda b: b["mime_type"] == "image/png"
     and b["metadata"] == {"trip": "rome"} and (b["width"], b["height"]) == (64, 40)),
    ("POST", "/api/threads/{T}/images", 201, lambda b: b["description"] == "The receipt again, as JSON"),
    ("GET", "/api/threads/{T}/images", 200, _page(2, lambda items: all(i["data"] is None for i in items))),
    ("GET", "/api/threads/{T}/images/{id}/content", 200, None),
    ("PATCH", "/api/threads/{T}/images/{id}", 200, lambda b: b["description"] == "Taxi receipt, Rome, 42 EUR"),
    ("POST", "/api/threads/{T}/messages", 201, lambda b: len(b["ids"]) == 1),
    ("GET", "/api/threads/{T}/messages/{id}", 200, lambda b: b["content"][1]["type"] == "image"
     and b["content"][1]["data"] is None),
    ("GET", "/api/threads/{T}/messages/{id}", 200, lambda b: b["content"][1]["data"]),
    # docs/api.md: deletes
    ("DELETE", "/api/threads/{T}/links/{id}", 204, None),
    ("DELETE", "/api/threads/{T}/images/{id}", 204, None),
    ("DELETE", "/api/threads/{T}/memories/{id}", 204, None),
    ("DELETE", "/api/threads/{T}/messages/{id}", 204, None),
    ("DELETE", "/api/threads/{T}", 204, None),
]


def _method(args: list[str]) -> str:
    for flag, value in zip(args, args[1:]):
        if flag in ("-X", "--request"):
            return value
    return "POST" if {"-d", "--data", "-F", "--form"} & set(args) else "GET"


def _calls(directory: Path) -> list[dict]:
    """The recorded curl calls, in order: method, URL, status, body bytes."""
    calls = []
    for args_file in sorted(directory.glob("*.args"), key=lambda p: int(p.stem)):
        args = args_file.read_bytes().decode().split("\0")[:-1]
        head = args_file.with_suffix(".head").read_text()
        calls.append({"method": _method(args), "url": next(a for a in reversed(args) if a.startswith("http")),
                      "status": int(head.split()[1]), "body": args_file.with_suffix(".body").read_bytes()})
    return calls


@pytest.fixture(scope="module")
def readme_server(tmp_path_factory):
    """A migrated, empty server as ``make serve`` starts it (no LLM); yields (base URL, env, its directory)."""
    directory = tmp_path_factory.mktemp("readme_server")
    env = server_env(directory)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True,
                   stdin=subprocess.DEVNULL, timeout=300)
    process, url = start_daphne(env, directory / "serve.log")
    try:
        yield url, env, directory
    finally:
        stop_process(process)


def _shell_blocks() -> list[str]:
    """The README's walkthrough, then ``docs/api.md``'s steps, which continue its bash session."""
    readme, api = marked_for(HERE, README, "sh"), marked_for(HERE, DOCS / "api.md", "sh")
    assert len(readme) == 5 and len(api) == 6 and README_BASE in readme[1]
    return readme + api


@pytest.mark.slow
def test_the_readme_walkthrough_and_the_api_steps_run_and_every_step_answers_as_documented(readme_server, tmp_path):
    url, env, directory = readme_server
    log = (directory / "serve.log").read_text()
    assert f"OAM Site ready on {url}\n" in log  # the one line `make serve` prints once it answers

    script = _PRELUDE + "\n".join(_shell_blocks()).replace(README_BASE, url)
    work, calls = tmp_path / "work", tmp_path / "calls"
    (work / "var").mkdir(parents=True)
    calls.mkdir()
    for name in (".venv", "manage.py"):
        (work / name).symlink_to(ROOT / name)
    proc = subprocess.run(["bash", "-c", script], cwd=work, capture_output=True, text=True, timeout=600,
                          env={**env, "CALLS": str(calls), "PYTHONPATH": str(ROOT)}, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n" \
                                 f"{proc.stderr[-4000:]}"

    recorded = _calls(calls)
    assert [(c["method"], c["status"]) for c in recorded] == [(m, s) for m, _, s, _ in STEPS], proc.stdout[-4000:]
    thread_id = json.loads(recorded[1]["body"])["thread_id"]
    for call, (method, path, status, check) in zip(recorded, STEPS):
        pattern = re.escape(path).replace(re.escape("{T}"), re.escape(thread_id))
        pattern = re.sub(r"\\\{[a-z]+\\\}", "[^/]+", pattern)
        assert re.fullmatch(pattern, urlsplit(call["url"]).path), (call["url"], path)
        if check is not None:
            assert check(json.loads(call["body"])), (method, path, call["body"][:2000])

    # The superuser line made a superuser who can sign in (friction 6 of issue #33: the non-interactive form).
    who = subprocess.run([sys.executable, "-c", "import django; django.setup()\n"
                          "from django.contrib.auth.models import User\n"
                          "u = User.objects.get(username='admin')\n"
                          "print(u.is_superuser, u.is_staff, u.check_password('change-me'), u.email)"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True)
    assert who.stdout.split() == ["True", "True", "True", "admin@example.org"]
    # Ids flow from step to step: the image part asked for is the one the message holds, and its bytes come back.
    *_, message_get, hydrated = [c for c in recorded if "/messages/" in c["url"] and c["method"] == "GET"]
    part = json.loads(message_get["body"])["content"][1]["id"]
    assert parse_qs(urlsplit(hydrated["url"]).query) == {"included_image_ids": [part]}
    copy = (work / "var" / "copy.png").read_bytes()
    assert copy.startswith(b"\x89PNG") and copy == (work / "var" / "receipt.png").read_bytes()
    # The WebSocket block: the handshake and the first frame, the thread's state.
    assert "HTTP/1.1 101 Switching Protocols" in proc.stdout
    state = next(json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"event": "state"'))
    assert state["thread_id"] == thread_id and state["watermark"] == 0
    assert proc.stdout.count("204\n") == 5  # the deletes' -w '%{http_code}\n'


@pytest.mark.slow
def test_the_health_probe_block_answers(readme_server):
    """``docs/deployment.md``'s probe line, against the same server."""
    url, env, _directory = readme_server
    [code] = marked_for(HERE, DOCS / "deployment.md", "sh")
    proc = subprocess.run(["bash", "-c", "set -euo pipefail\n" + code.replace(README_BASE, url)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    healthz, readyz = proc.stdout.split("}", 1)
    assert json.loads(healthz + "}") == {"status": "ok"}
    assert json.loads(readyz)["status"] in ("ok", "degraded")


def test_the_readme_python_example_prints_what_it_finds_and_a_second_run_finds_no_more(client, thread, capsys):
    """Friction 2 of issue #33: piped into ``manage.py shell`` the example printed nothing (its last line was
    a bare expression), and a second run found every result twice (a fixed user's search covers its earlier
    threads). Now it prints, and each run has a user of its own."""
    [code] = marked_for(HERE, README, "python")
    exec(compile(code, "README.md (Python)", "exec"), {})  # noqa: S102 - the README's own example
    first = capsys.readouterr().out
    assert first.splitlines()[0] == f"preference {OLD}" and "message I love pizza." in first.splitlines()
    exec(compile(code, "README.md (Python)", "exec"), {})  # noqa: S102
    assert capsys.readouterr().out == first  # the same results, not twice as many
