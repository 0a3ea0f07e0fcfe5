"""The staff quality dashboard (``staff.views.quality``/``thread_quality``): figures as JSON for a static script,
the vendored Chart.js, links from the project and thread pages, and bad ranges.

Who may see it (members of the project only) is ``tests/staff/test_project_membership.py``'s, which requests
every staff URL of a project; the charts themselves are drawn in ``tests/browser/test_quality.py``.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from django.conf import settings
from django.test import Client, override_settings

from memory.models import ExtractionJob, Memory
from tests.ids import key

PROJECT = "/staff/projects/default/quality/"
THREAD = "/staff/projects/default/threads/t-main/quality/"
VENDOR = Path(settings.BASE_DIR) / "static" / "staff" / "vendor" / "chart.js"
FIGURES = ["memories_by_type", "extraction_yield", "duplicates_skipped", "relations", "review_queue_age",
           "rejected_reasons"]


def page_data(response) -> dict:
    """The figures the page hands its script: the ``json_script`` element ``quality-data``."""
    html = response.content.decode()
    found = re.search(r'<script id="quality-data" type="application/json">(.*?)</script>', html, re.S)
    assert found, "no quality-data element"
    return json.loads(found.group(1))


def test_the_project_dashboard_ships_every_figure_as_json_for_a_static_script(staff, filled):
    thread = filled["thread"]
    Memory.objects.filter(pk=key(filled["pref"])).update(pending=True)  # one memory awaiting review
    ExtractionJob.objects.create(thread=thread.row, project=thread.row.project, from_seq=1, to_seq=3,
                                 status="done", finished_at=thread.row.created_at, messages_extracted=3,
                                 memories_created=2, duplicates_skipped=1, rejected_not_text=2)
    response = staff.get(PROJECT)
    assert response.status_code == 200
    data = page_data(response)
    assert (data["days"], data["bucket"], data["thread_id"]) == (30, "day", None)
    figures = data["figures"]
    assert list(figures) == FIGURES
    assert figures["memories_by_type"]["total"] == 3
    assert figures["extraction_yield"]["yield"] == round(2 / 3, 3)
    assert figures["duplicates_skipped"]["duplicates"] == 1
    assert figures["relations"]["supersedes"] == 1 and figures["relations"]["invalidated"] == 1
    assert figures["review_queue_age"]["total"] == 1
    assert figures["rejected_reasons"]["totals"]["not_text"] == 2

    html = response.content.decode()
    assert [f for f in re.findall(r'<figure class="card chart" data-figure="([a-z_]+)"', html)] == FIGURES
    assert html.count("<canvas") == len(FIGURES)
    # scripts come from this origin's static files only: the vendored Chart.js and the page script
    sources = re.findall(r"<script([^>]*)>", html)
    assert all('src="/static/' in s or 'type="application/json"' in s for s in sources), sources
    assert 'src="/static/staff/vendor/chart.js/chart.umd.min.js"' in html and 'src="/static/staff/quality.js"' in html
    assert "cdn" not in html.lower() and ' style="' not in html
    policy = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert 'aria-current="page">Quality</a>' in html


def test_the_thread_dashboard_counts_that_thread_only(staff, filled, client):
    other = client.create_thread(thread_id="t-other", user_id="user-1", agent_id="agent-1")
    other.add_memory("Elsewhere entirely", memory_type="guideline")
    whole = page_data(staff.get(PROJECT))["figures"]["memories_by_type"]
    response = staff.get(THREAD + "?days=7")
    assert response.status_code == 200
    data = page_data(response)
    assert (data["days"], data["bucket"], data["thread_id"]) == (7, "day", "t-main")
    assert (whole["total"], data["figures"]["memories_by_type"]["total"]) == (4, 3)
    assert len(data["figures"]["memories_by_type"]["labels"]) == 8
    html = response.content.decode()
    assert 'href="/staff/projects/default/threads/t-main/"' in html  # back to the thread
    assert 'href="/staff/projects/default/quality/?days=7"' in html  # the whole project, same range


def test_a_range_that_is_not_offered_is_an_error_next_to_the_field(staff, thread):
    for days in ("5", "abc", "99999999999999999999"):
        response = staff.get(f"{PROJECT}?days={days}")
        assert response.status_code == 422, days
        html = response.content.decode()
        assert 'id="quality-data"' not in html and "<canvas" not in html
        assert re.search(r'<ul class="errorlist[^"]*" id="id_days_error"', html), html
    for query in ("", "?days="):  # absent or blank: the default range, shown selected
        response = staff.get(PROJECT + query)
        assert response.status_code == 200 and page_data(response)["days"] == 30
        assert '<option value="30" selected>' in response.content.decode()
    assert '<option value="365" selected>' in staff.get(f"{PROJECT}?days=365").content.decode()


def test_a_missing_thread_is_a_404_and_strangers_log_in_first(staff, anon, thread):
    assert staff.get("/staff/projects/default/threads/nope/quality/").status_code == 404
    assert staff.get("/staff/projects/no-such-project/quality/").status_code == 404
    response = anon.get(PROJECT)
    assert response.status_code == 302 and response.url.startswith("/staff/login/")


def test_the_project_and_thread_pages_link_to_the_dashboards(staff, thread):
    assert f'href="{PROJECT}"' in staff.get("/staff/projects/").content.decode()
    assert f'href="{PROJECT}"' in staff.get("/staff/projects/default/threads/").content.decode()
    assert f'href="{THREAD}"' in staff.get("/staff/projects/default/threads/t-main/").content.decode()


def test_the_vendored_chart_library_is_the_one_its_readme_names(db, tmp_path):
    """``static/staff/vendor/chart.js/README.md`` records the npm version and the file's sha256
    (``scripts/vendor_chartjs.sh`` writes both); the licence travels with it, and the app serves it."""
    readme = (VENDOR / "README.md").read_text()
    version = re.search(r"^- version: (\S+)$", readme, re.M).group(1)
    digest = re.search(r"^- sha256 of chart.umd.min.js: ([0-9a-f]{64})$", readme, re.M).group(1)
    code = (VENDOR / "chart.umd.min.js").read_bytes()
    assert hashlib.sha256(code).hexdigest() == digest
    assert code.startswith(f"/*!\n * Chart.js v{version}\n".encode())
    assert "MIT License" in (VENDOR / "LICENSE.md").read_text()
    with override_settings(STATIC_ROOT=tmp_path / "never-collected"):
        browser = Client()
        for path in ("/static/staff/vendor/chart.js/chart.umd.min.js", "/static/staff/quality.js"):
            assert browser.get(path).status_code == 200, path
