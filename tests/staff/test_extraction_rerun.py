"""The staff button that re-runs a thread's failed extraction range (issue #34); the API's twin is in
``tests/api/test_extraction_catchup.py``, another project's thread answers 404 in
``tests/staff/test_project_membership.py`` (every staff URL)."""

from __future__ import annotations

import pytest

from memory.llm.adapters import LlmRequestRejected
from memory.llm.scripted import ScriptedLlm
from memory.models import ExtractionJob


@pytest.mark.parametrize("as_htmx", [True, False])
def test_the_staff_button_reruns_a_failed_range(staff, htmx, monkeypatch, client, fresh_extraction_tracker, as_htmx):
    """The staff thread page lists the failed range with its reason and a re-run button (CSRF form, htmx);
    the button queues it again, noted as by that staff user."""
    from memory.client import MemoryExtractionConfig

    bad = ScriptedLlm([LlmRequestRejected("400 Bad Request: schema refused", status_code=400)])
    monkeypatch.setattr("memory.llm.adapters.get_llm", lambda: bad)
    thread = client.create_thread(thread_id="t-x", user_id="u", agent_id="a", memory_extraction_config=(
        MemoryExtractionConfig(extraction_mode="inline", enable_context_summary=False)))
    thread.add_messages([{"role": "user", "content": "I keep bees on my roof."}])
    job = ExtractionJob.objects.get()
    page = staff.get("/staff/projects/default/threads/t-x/").content.decode()
    assert "Failed ranges (1)" in page and "schema refused" in page and f"Re-run job {job.pk}" in page
    assert 'name="csrfmiddlewaretoken"' in page

    url = "/staff/projects/default/threads/t-x/extraction/rerun/"
    clerk = htmx if as_htmx else staff
    bad_id = clerk.post(url, {"job_id": "x1"})
    missing = clerk.post(url, {"job_id": str(job.pk + 99)})
    if as_htmx:
        assert bad_id.status_code == 422 and "job_id: must be a job number" in bad_id.content.decode()
        assert missing.status_code == 404 and "is not a failed extraction job" in missing.content.decode()
    resp = clerk.post(url, {"job_id": str(job.pk)})
    job.refresh_from_db()
    assert (job.status, job.trigger) == ("queued", "rerun") and job.error.startswith("rerun by staff ")
    if as_htmx:
        html = resp.content.decode()
        assert resp.status_code == 200 and html.lstrip().startswith('<div id="extraction-state">')
        assert f"Queued again: job {job.pk} (messages #1–#1)" in html and "Failed ranges" not in html
    else:
        assert resp.status_code == 302
        assert "Queued again" in staff.get("/staff/projects/default/threads/t-x/").content.decode()


@pytest.mark.parametrize("raw", ["²", "٣", "3.0", "-1", "1" * 25])
def test_a_job_id_that_is_not_ascii_digits_is_a_422_note(htmx, client, raw):
    """An outside attack: "²" passed str.isdigit() and int() raised (a 500); "٣" was read as job 3."""
    client.create_thread(thread_id="t-y", user_id="u", agent_id="a")
    resp = htmx.post("/staff/projects/default/threads/t-y/extraction/rerun/", {"job_id": raw})
    assert resp.status_code == 422 and "job_id: must be a job number" in resp.content.decode()
