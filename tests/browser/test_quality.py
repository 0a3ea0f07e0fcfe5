"""The staff quality dashboard in Debian's Chromium: every figure drawn by the vendored Chart.js, under the CSP.

A thread of its own (a fresh user, so extraction's duplicate check meets nothing of other tests) gets two
batches of messages extracted by the live server's LLM; with the scripted LLM each reply also carries an item
that is not text and a repeat (rejected candidates), and the second batch repeats a message (a duplicate
skipped). Two memories related by ``supersedes`` and one memory marked pending (the review queue
item 2, marks memories ``pending``) give the other figures data. The ``page`` fixture fails the test on any
Content-Security-Policy violation in the console.
"""

from __future__ import annotations

import re
import time
import uuid

import pytest
from playwright.sync_api import expect

from tests.browser.harness import scripted_reply

FIGURES = ["memories_by_type", "extraction_yield", "duplicates_skipped", "relations", "review_queue_age",
           "rejected_reasons"]

#: What the page drew for one figure: Chart.js's chart on the canvas, its non-zero values, and whether the
#: canvas holds painted pixels (not a blank bitmap).
DRAWN = """box => {
  const canvas = box.querySelector("canvas");
  const chart = window.Chart && window.Chart.getChart(canvas);
  if (!chart) return null;
  const values = chart.data.datasets.flatMap(ds => ds.data).filter(v => typeof v === "number" && v !== 0);
  const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  let painted = 0;
  for (let i = 3; i < pixels.length; i += 4) if (pixels[i] !== 0) painted += 1;
  return {type: chart.config.type, datasets: chart.data.datasets.length, labels: chart.data.labels.length,
          nonzero: values.length, width: canvas.width, height: canvas.height, painted: painted};
}"""


@pytest.fixture(autouse=True)
def patient_expect():
    """``expect`` waits 20 s here, not Playwright's 5: the server's first write loads the embedding model."""
    expect.set_options(timeout=20_000)
    yield
    expect.set_options(timeout=5_000)


def with_rejections(body: dict):
    """The scripted reply, plus (for extraction calls) an item that is not text and a repeat of the first."""
    reply = scripted_reply(body)
    if isinstance(reply, dict) and reply.get("memories"):
        first = reply["memories"][0]
        reply["memories"] += [{**first, "content": "?? !! --"}, dict(first)]
    return reply


def extract(live_app, thread_id: str, messages: list[dict]) -> None:
    status, body = live_app.api("POST", f"/threads/{thread_id}/messages", {"messages": messages})
    assert status == 201, body
    deadline = time.monotonic() + (300 if live_app.llm_mode == "local" else 60)
    while True:  # the API waits at most 60 s a call
        status, body = live_app.api("GET", f"/threads/{thread_id}/extraction?wait=60", timeout=90)
        assert status == 200, body
        if body["settled"] or time.monotonic() > deadline:
            break
    assert body["settled"], body


def drawn(page) -> dict[str, dict]:
    out = {}
    for name in FIGURES:
        box = page.locator(f'figure[data-figure="{name}"]')
        expect(box).to_have_attribute("data-rendered", "true")
        expect(box.locator("canvas")).to_be_visible()
        out[name] = box.evaluate(DRAWN)
    return out


def test_the_quality_dashboard_plots_every_figure(logged_in_page, live_app, screenshot):
    page = logged_in_page
    run = uuid.uuid4().hex[:8]
    thread_id = f"browser-quality-{run}"
    status, body = live_app.api("POST", "/threads", {"thread_id": thread_id, "user_id": f"quality-user-{run}",
                                                     "agent_id": "browser-agent"})
    assert status == 201, body
    if live_app.llm is not None:
        live_app.llm.handler = with_rejections
    try:
        extract(live_app, thread_id, [{"role": "user", "content": "I teach contemporary dance on Saturdays."},
                                      {"role": "user", "content": "My studio is next to the river."}])
        extract(live_app, thread_id, [{"role": "user", "content": "I teach contemporary dance on Saturdays."}])
    finally:
        if live_app.llm is not None:
            live_app.llm.handler = None
    ids = []
    for content in ("The studio opens at nine.", "The studio opens at ten.", "Always greet the user in Portuguese."):
        status, body = live_app.api("POST", f"/threads/{thread_id}/memories", {
            "content": content, "memory_type": "guideline" if "greet" in content else "fact",
            "autonomous_linking": False})
        assert status == 201, body
        ids.append(body["id"])
    status, body = live_app.api("POST", f"/threads/{thread_id}/links", {
        "source_record_id": ids[1], "source_record_type": "fact", "target_record_id": ids[0],
        "target_record_type": "fact", "relation_type": "supersedes"})
    assert status == 201, body
    live_app.python("from memory.models import Memory\n"  # awaiting review, as the review queue stores it
                    f"result = Memory.objects.filter(pk=key({ids[2]!r})).update(pending=True)")

    # from the thread page to its dashboard
    page.goto(f"/staff/projects/default/threads/{thread_id}/")
    page.get_by_role("link", name="Memory quality plots").click()
    expect(page).to_have_url(re.compile(rf"/threads/{thread_id}/quality/$"))
    expect(page.locator("h1")).to_contain_text(thread_id)
    figures = drawn(page)
    for name, seen in figures.items():
        assert seen is not None, f"{name}: no Chart.js chart on its canvas"
        assert seen["width"] > 0 and seen["height"] > 0 and seen["painted"] > 0, (name, seen)
        assert seen["datasets"] >= 2 and seen["labels"] >= 6, (name, seen)
        assert page.locator(f'figure[data-figure="{name}"]').get_attribute("data-points") == str(seen["nonzero"])
    expect(page.locator('figure[data-figure="review_queue_age"] figcaption')).to_contain_text(
        "1 memory awaiting review")
    with_data = {"memories_by_type", "relations", "review_queue_age"}
    if live_app.llm_mode != "none":
        with_data.add("extraction_yield")  # messages read
    if live_app.llm_mode == "scripted":
        with_data |= {"duplicates_skipped", "rejected_reasons"}
        expect(page.locator('figure[data-figure="extraction_yield"] figcaption')).to_contain_text("from 3 messages")
        expect(page.locator('figure[data-figure="duplicates_skipped"] figcaption')).to_contain_text(
            "skipped because they restated a stored memory (1)")
    for name in with_data:
        assert figures[name]["nonzero"] > 0, (name, figures[name])
    screenshot(page, "staff-quality-thread")

    # the project's dashboard, another range through the form (a plain GET)
    page.get_by_role("link", name="The whole project").click()
    expect(page).to_have_url(re.compile(r"/staff/projects/default/quality/\?days=30$"))
    page.get_by_label("Range", exact=True).select_option("7")
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(r"/staff/projects/default/quality/\?days=7$"))
    project = drawn(page)
    assert project["memories_by_type"]["labels"] == 8 and project["memories_by_type"]["nonzero"] > 0
    assert project["relations"]["nonzero"] >= figures["relations"]["nonzero"]  # the seeded thread's too
    screenshot(page, "staff-quality-project")
