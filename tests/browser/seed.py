"""Seed the browser tests' server database: ``python -m tests.browser.seed --sample conv-30``.

Run by ``tests/browser/conftest.py`` in a subprocess whose environment points
``OAM_SQLITE_PATH``/``OAM_VAR_DIR`` at the live server's own files (never the
test database pytest-django makes, never ``var/oam.sqlite3``). It

1. migrates the database and collects static files (WhiteNoise serves them
   from ``STATIC_ROOT`` under daphne);
2. creates a superuser (staff) and a plain active user, with known passwords,
   and an API key;
3. imports one LoCoMo sample through ``manage.py import_locomo`` (the data
   stays in ``shared/data/locomo``);
4. stores three memories and two relations in the sample's first session
   thread through ``memory.client`` (one memory superseded, hence invalid).

Nothing is extracted while seeding (no LLM in its environment). The imported
threads store no extraction config and have no extraction jobs, so the
server's boot sweep leaves them alone even with an LLM: their messages stay
pending (watermark 0) until a test extracts them, e.g. with the staff pages'
"Extract now", which then runs with the live server's LLM.

Prints one JSON line, the ``Seed`` fields, last on stdout.
"""

from __future__ import annotations

import argparse
import json
import os

STAFF = ("staff", "staff-pw-for-browser-tests")
VIEWER = ("viewer", "viewer-pw-for-browser-tests")


def seed(sample: str) -> dict:
    """Fill the database; return what tests need to find it again (ids, credentials, the API key)."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)

    users = get_user_model()
    users.objects.create_superuser(STAFF[0], "staff@example.com", STAFF[1])
    users.objects.create_user(VIEWER[0], "viewer@example.com", VIEWER[1])  # active, not staff

    from threads.auth import api_key_create

    _, api_key = api_key_create(name="browser-tests")

    call_command("import_locomo", samples=[sample], verbosity=0)

    from memory.client import AgentMemory
    from memory.core.ids import public_id
    from memory.models import Thread

    imported = [public_id(pk) for pk in Thread.objects.filter(user_id=sample).values_list("pk", flat=True)]
    thread_ids = sorted(imported, key=lambda tid: int(tid.rsplit("-s", 1)[1]))
    thread_id = thread_ids[0]

    thread = AgentMemory(llm=None).get_thread(thread_id)
    messages = thread.get_messages(start=0, end=None)
    speaker = messages[1].role  # LoCoMo: the speakers are the roles
    meta = {"seeded_by": "tests/browser"}
    old = thread.add_memory(f"{speaker} works as a banker.", memory_type="fact", metadata=meta,
                            autonomous_linking=False)
    new = thread.add_memory(f"{speaker} lost a job as a banker and is starting a dance studio.",
                            memory_type="fact", metadata=meta, autonomous_linking=False)
    pref = thread.add_memory(f"{speaker}'s favourite dance style is contemporary.", memory_type="preference",
                             metadata=meta, autonomous_linking=False)
    supersedes = thread.link_records(new, "fact", old, "fact", "supersedes")
    supports = thread.link_records(pref, "preference", new, "fact", "supports")
    return {
        "sample": sample,
        "default_project_id": thread.project.pk,
        "thread_id": thread_id,
        "thread_ids": thread_ids,
        "message_ids": [m.id for m in messages],
        "memory_ids": {"superseded": old, "current": new, "preference": pref},
        "relation_ids": {"supersedes": supersedes, "supports": supports},
        "api_key": api_key,
        "staff": list(STAFF),
        "viewer": list(VIEWER),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", default="conv-30", help="LoCoMo sample id to import")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oam_site.settings")
    import django

    django.setup()
    print(json.dumps(seed(args.sample)), flush=True)


if __name__ == "__main__":
    main()
