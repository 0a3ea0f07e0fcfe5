"""The supervised production recipe (``deploy/systemd``): units systemd accepts, restarting what dies.

The scale-out units (N ``oam-daphne@PORT`` web servers, M ``oam-worker@N`` workers, ``oam-migrate`` once,
on one PostgreSQL: docs/postgresql.md) are verified the same way, their commands are shown to name what
exists (the module, the manage.py command), and ``env.postgresql.example`` is shown to select the
PostgreSQL backend and the Redis broker when settings read it.

systemd does not run inside the test machines, so the units are checked with
``systemd-analyze verify`` (with the repository and this virtualenv in place of
``/opt/oam-site``), and the worker unit's command is run for real on the Redis
broker at 127.0.0.1: when its Dramatiq worker process is killed with SIGKILL,
the unit's main process exits non-zero, which is what ``Restart=always``
restarts (``bench/extraction_soak.py`` does that restart loop under load).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parents[1]
UNITS = ROOT / "deploy" / "systemd"
#: Generous bound for a worker to start (Django, Dramatiq and the embedder's imports on a busy machine).
START_SECONDS = 120


def _rendered(tmp_path: Path) -> Path:
    env_file = tmp_path / "env"
    env_file.write_text((UNITS / "env.example").read_text())
    out = tmp_path / "units"
    out.mkdir()
    venv_bin = str(Path(sys.executable).parent)
    for unit in UNITS.glob("oam-*"):
        text = (unit.read_text().replace("/opt/oam-site/.venv/bin", venv_bin).replace("/opt/oam-site", str(ROOT))
                .replace("/etc/oam-site/env", str(env_file)))
        (out / unit.name).write_text(text)
    return out


def _service(unit: str) -> dict[str, str]:
    values = {}
    for line in (UNITS / unit).read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_the_units_verify(tmp_path):
    out = _rendered(tmp_path)
    for name in ("oam-web.service", "oam-worker@1.service", "oam-workers.target", "oam-daphne@8001.service",
                 "oam-daphnes.target", "oam-migrate.service"):
        proc = subprocess.run(["systemd-analyze", "verify", str(out / name)], capture_output=True, text=True,
                              cwd=out, timeout=60)
        complaints = [line for line in (proc.stdout + proc.stderr).splitlines() if str(out) in line]
        assert proc.returncode == 0 and complaints == [], proc.stdout + proc.stderr
    for unit in ("oam-web.service", "oam-worker@.service", "oam-daphne@.service"):
        assert _service(unit)["Restart"] == "always"


def test_the_scale_out_units_run_commands_that_exist():
    daphne = shlex.split(_service("oam-daphne@.service")["ExecStart"])
    assert daphne[1:3] == ["-m", "oam_site.serve"] and daphne[daphne.index("-p") + 1] == "%i"  # instance = port
    assert importlib.util.find_spec("oam_site.serve") is not None
    migrate = shlex.split(_service("oam-migrate.service")["ExecStart"])
    assert migrate[1:3] == ["manage.py", "migrate"] and _service("oam-migrate.service")["Type"] == "oneshot"
    from django.core.management import get_commands

    assert "migrate" in get_commands() and "rundramatiq" in get_commands()
    assert "oam-migrate.service" in _service("oam-daphne@.service")["After"]
    wanted = _service("oam-daphnes.target")["Wants"].split()
    assert wanted and all(re.fullmatch(r"oam-daphne@\d+\.service", name) for name in wanted)


def test_the_postgresql_environment_file_selects_postgresql_and_the_broker():
    values = dict(line.split("=", 1) for line in (UNITS / "env.postgresql.example").read_text().splitlines()
                  if line and not line.startswith("#"))
    assert values["OAM_DATABASE_URL"].startswith("postgres://")
    assert values["OAM_DRAMATIQ_BROKER_URL"].startswith("redis://")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OAM_", "DJANGO_"))}
    env.update(values, DJANGO_SETTINGS_MODULE="oam_site.settings", OAM_VAR_DIR=str(ROOT / "var"))
    probe = ("from django.conf import settings as s; import json; d = s.DATABASES['default']; "
             "print(json.dumps([d['ENGINE'], d['NAME'], d['HOST'], d['PORT'], s.DRAMATIQ_BROKER['BROKER']]))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == ["memory.backends.postgresql", "oam", "db.example.org", 5432,
                                                        "dramatiq.brokers.redis.RedisBroker"]


def test_the_worker_unit_exits_when_its_worker_process_is_killed(tmp_path):
    command = shlex.split(_service("oam-worker@.service")["ExecStart"])
    command[0] = sys.executable
    env = {k: v for k, v in os.environ.items() if not k.startswith("OAM_")}
    env.update({"DJANGO_SETTINGS_MODULE": "oam_site.settings", "OAM_SQLITE_PATH": str(tmp_path / "db.sqlite3"),
                "OAM_DRAMATIQ_BROKER_URL": "redis://127.0.0.1:6379/0",
                "OAM_DRAMATIQ_NAMESPACE": f"oam-test-deploy-{os.getpid()}", "OAM_EXTRACTION_SWEEP_SECONDS": "0"})
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=300)
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        unit = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + START_SECONDS
        broker = redis.Redis(host="127.0.0.1", port=6379)
        while not any(broker.scan_iter(f"{env['OAM_DRAMATIQ_NAMESPACE']}*heartbeats*")):  # consuming: ready
            assert unit.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        children = [int(p.parent.name) for p in Path("/proc").glob("[0-9]*/stat")
                    if p.read_text().rsplit(")", 1)[1].split()[1] == str(unit.pid)]
        assert children, "no Dramatiq worker process under the unit"
        os.kill(children[0], signal.SIGKILL)
        assert unit.wait(timeout=60) != 0  # the unit stops, non-zero: systemd's Restart=always starts it again
    finally:
        try:
            os.killpg(unit.pid, signal.SIGKILL)  # whatever of the unit is left
        except ProcessLookupError:
            pass
        unit.wait(timeout=10)
        for key in redis.Redis(host="127.0.0.1", port=6379).scan_iter(f"{env['OAM_DRAMATIQ_NAMESPACE']}*"):
            redis.Redis(host="127.0.0.1", port=6379).delete(key)


def test_every_long_running_unit_checks_the_database_before_it_starts(tmp_path):
    """Bad database configuration stops a unit at start-up with the system check's message (memory.E004-E006),
    and that command really fails on an unreachable server."""
    for unit in ("oam-web.service", "oam-daphne@.service", "oam-worker@.service"):
        assert _service(unit)["ExecStartPre"].endswith("manage.py check --database default"), unit
    command = shlex.split(_service("oam-worker@.service")["ExecStartPre"])
    command[0] = sys.executable
    env = {k: v for k, v in os.environ.items() if not k.startswith("OAM_")}
    env.update({"DJANGO_SETTINGS_MODULE": "oam_site.settings", "OAM_VAR_DIR": str(tmp_path),
                "OAM_DATABASE_URL": "postgres://oam:pw@127.0.0.1:1/oam"})
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "memory.E004" in done.stderr
