"""The staff pages in Debian's Chromium against daphne: Playwright, real WebSocket, real htmx.

Fixtures from ``tests/browser/conftest.py``: ``live_app`` (daphne on its own
SQLite file with the LoCoMo sample ``conv-30`` imported and three memories and
two relations in ``conv-30-s1``), ``logged_in_page`` (the seeded staff user,
logged in at ``/staff/login/``), ``screenshot``. Each page is saved under
``test-artifacts/screenshots/staff-*.png``.

The tests share the server: they change only records they create, or the
content of the seeded preference memory (never the seeded statuses or
relations, which tests/browser/test_harness.py checks).
"""

from __future__ import annotations

import base64
import json
import re
import uuid

import pytest
from playwright.sync_api import expect

from memory.dev import locomo
from tests import image_samples as samples
from tests.browser.harness import login


@pytest.fixture(autouse=True)
def patient_expect():
    """``expect`` waits 20 s here, not Playwright's 5: the server's first write loads the embedding model."""
    expect.set_options(timeout=20_000)
    yield
    expect.set_options(timeout=5_000)


def _sample(live_app):
    return next(s for s in locomo.iter_samples(locomo.default_data_path()) if s.sample_id == live_app.seed["sample"])


def _thread_url(live_app, thread_id=None) -> str:
    return f"/staff/projects/default/threads/{thread_id or live_app.seed['thread_id']}/"


def test_log_in_and_browse_the_thread_list(page, live_app, screenshot):
    login(page, live_app.url, *live_app.staff, login_path="/staff/login/")
    expect(page).to_have_url(re.compile(r"/staff/projects/default/threads/$"))
    listing = page.locator("#thread-list")
    expect(listing.locator("tbody tr").first).to_be_visible()
    # the stylesheet served by the app applies (WhiteNoise under daphne)
    header = page.locator(".site-header").evaluate("el => getComputedStyle(el).backgroundColor")
    assert header == "rgb(34, 49, 63)", header

    sample = _sample(live_app)
    page.get_by_label("User id", exact=True).fill(sample.sample_id)
    page.get_by_role("button", name="Filter").click()  # htmx swaps the list and pushes the URL
    expect(page).to_have_url(re.compile(rf"user_id={sample.sample_id}"))
    rows = page.locator("#thread-list tbody tr")
    expect(rows).to_have_count(len(sample.sessions))
    first = page.locator(f'#thread-list tr[data-thread-id="{live_app.seed["thread_id"]}"]')
    counts = first.locator("td.num").all_inner_texts()
    assert counts == [str(len(live_app.seed["message_ids"])), "3"], counts  # messages, memories
    screenshot(page, "staff-threads")

    # a metadata filter that breaks the grammar is shown next to its field, nothing else changes
    page.get_by_label("Metadata filter (JSON)").fill('{"$nope": 1}')
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#id_metadata_error")).to_contain_text("metadata_filter")
    expect(page.locator("#id_metadata")).to_have_attribute("aria-invalid", "true")

    page.get_by_label("Metadata filter (JSON)").fill('{"no_such_key": 1}')
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#thread-list")).to_contain_text("0 threads")
    metadata = live_app.python("from memory.models import Thread\n"
                               f"result = Thread.objects.get(pk=key({live_app.seed['thread_id']!r})).metadata")
    if metadata:  # the importer's thread metadata, filtered in SQL with the search grammar
        key = sorted(metadata)[0]
        page.get_by_label("Metadata filter (JSON)").fill(json.dumps({key: metadata[key]}))
        page.get_by_role("button", name="Filter").click()
        expect(page.locator(f'#thread-list tr[data-thread-id="{live_app.seed["thread_id"]}"]')).to_have_count(1)
    page.get_by_label("Metadata filter (JSON)").fill("")
    page.get_by_role("button", name="Filter").click()
    page.locator(f'#thread-list a:text-is("{live_app.seed["thread_id"]}")').click()
    expect(page.locator("h1")).to_contain_text(live_app.seed["thread_id"])


def test_the_thread_page_shows_the_conversation_memories_and_relations(logged_in_page, live_app, screenshot):
    page = logged_in_page
    page.goto(_thread_url(live_app))
    sample = _sample(live_app)
    session = next(s for s in sample.sessions if s.number == 1)
    timeline = page.locator("#timeline li.message")
    expect(timeline).to_have_count(len(session.turns))
    expect(timeline.first).to_contain_text(session.turns[0].speaker)
    expect(timeline.first).to_contain_text(session.turns[0].text[:40])
    expect(timeline.last).to_contain_text(session.turns[-1].text[:40])

    memories = live_app.seed["memory_ids"]
    expect(page.locator('#memories [data-memory-type="fact"] li.memory')).to_have_count(2)
    expect(page.locator('#memories [data-memory-type="preference"] li.memory')).to_have_count(1)
    expect(page.locator(f'#memories li[data-memory-id="{memories["superseded"]}"] .badge-invalid')).to_be_visible()
    expect(page.locator("#relations .relation-list li")).to_have_count(2)
    expect(page.locator("#relations svg .edge")).to_have_count(2)
    expect(page.locator("#summary")).to_contain_text(session.turns[-1].text[:30])
    expect(page.locator("#extraction-progress")).to_have_attribute("data-socket", "open")
    screenshot(page, "staff-thread")

    # keyboard: the skip link leads to the content, the edit disclosure opens with Enter
    page.keyboard.press("Tab")
    expect(page.locator(".skip-link")).to_be_focused()
    summary = page.locator(f'#memories li[data-memory-id="{memories["preference"]}"] details.edit summary')
    summary.focus()
    page.keyboard.press("Enter")
    expect(page.locator(f'#memories li[data-memory-id="{memories["preference"]}"] details.edit')).to_have_attribute(
        "open", "")


def test_edit_a_memory_and_see_it_persist(logged_in_page, live_app, screenshot):
    page = logged_in_page
    memory_id = live_app.seed["memory_ids"]["preference"]
    page.goto(_thread_url(live_app))
    item = page.locator(f'#memories li[data-memory-id="{memory_id}"]')
    item.get_by_text("Edit memory").click()
    new_text = f"Favourite dance style: jazz ({uuid.uuid4().hex[:6]})."
    item.get_by_label("Content").fill(new_text)
    item.get_by_label("TTL (days from the anchor; empty: keep)").fill("30")
    item.get_by_role("button", name="Save memory").click()
    item = page.locator(f'#memories li[data-memory-id="{memory_id}"]')  # htmx swapped #memories
    expect(item.locator(".memory-content")).to_have_text(new_text)
    expect(item.locator(".ttl")).to_contain_text("TTL: expires")
    screenshot(page, "staff-memory-edited")

    page.reload()
    expect(page.locator(f'#memories li[data-memory-id="{memory_id}"] .memory-content')).to_have_text(new_text)
    stored = live_app.python(
        "from memory.models import Memory, SearchChunk\n"
        f"m = Memory.objects.get(pk=key({memory_id!r}))\n"
        f"c = SearchChunk.objects.get(source_kind='memory', record_id=key({memory_id!r}))\n"
        "result = [m.content, (m.expires_at - m.created_at).days, c.text]"
    )
    assert stored == [new_text, 30, new_text]  # the chunk was rewritten (re-embedded) with it

    # an error comes back next to the field, over htmx, and nothing is saved
    item = page.locator(f'#memories li[data-memory-id="{memory_id}"]')
    item.get_by_text("Edit memory").click()
    item.get_by_label("Content").fill("   ")
    item.get_by_role("button", name="Save memory").click()
    item = page.locator(f'#memories li[data-memory-id="{memory_id}"]')
    expect(item.locator(".errors")).to_contain_text("must not be empty")
    page.reload()
    expect(page.locator(f'#memories li[data-memory-id="{memory_id}"] .memory-content')).to_have_text(new_text)


def test_add_a_memory_then_delete_it_after_confirming(logged_in_page, live_app):
    page = logged_in_page
    page.goto(_thread_url(live_app))
    text = f"Staff note {uuid.uuid4().hex[:6]}: prefers morning classes."
    page.locator("#memories details.add summary").click()
    page.locator("#id_add-content").fill(text)
    page.locator("#id_add-memory_type").select_option("guideline")
    page.get_by_role("button", name="Add memory").click()
    item = page.locator('#memories [data-memory-type="guideline"] li.memory', has_text=text)
    expect(item).to_have_count(1)

    item.get_by_text("Delete memory…").click()
    confirm = item.locator(".confirm")
    expect(confirm).to_contain_text("cannot be undone")
    confirm.get_by_text("Cancel").click()  # cancelling deletes nothing
    expect(item.locator(".confirm")).to_have_count(0)
    item.get_by_text("Delete memory…").click()
    item.locator(".confirm").get_by_role("button", name="Delete memory").click()
    expect(page.locator("#memories li.memory", has_text=text)).to_have_count(0)
    left = live_app.python(
        f"from memory.models import Memory\nresult = Memory.objects.filter(content={text!r}).count()")
    assert left == 0


def test_run_a_search(logged_in_page, live_app, screenshot):
    page = logged_in_page
    page.goto("/staff/projects/default/search/")
    page.get_by_label("Query", exact=True).fill("dance studio")
    page.get_by_label("User id", exact=True).fill(live_app.seed["sample"])
    page.get_by_role("button", name="Search").click()
    results = page.locator("#search-results li.result")
    expect(results.first).to_be_visible()
    assert 1 <= results.count() <= 10
    expect(results.first.locator(".score")).to_contain_text(re.compile(r"score \d\.\d{4}"))
    expect(results.first.locator(".source")).to_contain_text("thread")
    current = live_app.seed["memory_ids"]["current"]
    expect(page.locator(f'#search-results li[data-record-id="{current}"]')).to_have_count(1)
    expect(page).to_have_url(re.compile(r"query=dance(\+|%20)studio"))
    screenshot(page, "staff-search")


def test_open_the_context_card(logged_in_page, live_app, screenshot):
    page = logged_in_page
    page.goto(_thread_url(live_app))
    page.get_by_role("link", name="Context card preview").click()
    card = page.locator("#context-card")
    expect(card).to_contain_text("<context_card>")
    expect(card).to_contain_text("<relevant_information>")
    page.get_by_label("Max recent messages").fill("2")
    page.get_by_role("button", name="Build card").click()
    expect(page.locator("#context-card")).to_contain_text("<recent_messages>")
    screenshot(page, "staff-context-card")


def test_watch_extraction_progress_arrive_over_the_websocket(logged_in_page, live_app, screenshot):
    page = logged_in_page
    thread_id = f"browser-staff-{uuid.uuid4().hex[:8]}"
    status, body = live_app.api("POST", "/threads", {"thread_id": thread_id, "user_id": "browser-user",
                                                     "agent_id": "browser-agent"})
    assert status == 201, body
    page.goto(_thread_url(live_app, thread_id))
    progress = page.locator("#extraction-progress")
    expect(progress).to_have_attribute("data-socket", "open")
    expect(progress.locator('[data-role="status"]')).to_contain_text("Listening for extraction events")

    if live_app.llm_mode == "none":  # no LLM in the server: the page says so instead of extracting
        expect(progress).to_contain_text("Off (no LLM configured")
        page.get_by_role("button", name="Extract pending messages now").click()
        expect(progress).to_contain_text("no LLM is configured")
        return

    if live_app.llm is not None:
        live_app.llm.delay = 0.5  # slow enough to see "running" before "finished"
    try:
        status, body = live_app.api("POST", f"/threads/{thread_id}/messages", {"messages": [
            {"role": "user", "content": "I teach contemporary dance on Saturdays."},
            {"role": "user", "content": "My studio is next to the river."},
        ]})
        assert status == 201, body
        expect(progress).to_have_attribute("data-state", "running", timeout=60_000)
        timeout = 300_000 if live_app.llm_mode == "local" else 60_000
        expect(progress).to_have_attribute("data-state", "finished", timeout=timeout)
    finally:
        if live_app.llm is not None:
            live_app.llm.delay = 0.0
    log = progress.locator('[data-role="log"] li').all_inner_texts()
    assert any("Queued: job" in line for line in log) and any("Running: job" in line for line in log), log
    expect(progress.locator('[data-role="status"]')).to_contain_text("Finished: job")
    expect(page.locator("#timeline li.message")).to_have_count(2)  # the conversation reloads by itself too
    if live_app.llm_mode == "scripted":  # one fact per message; the memories region reloads by itself
        expect(page.locator("#memories li.memory")).to_have_count(2)
        expect(page.locator("#memories")).to_contain_text("user said: I teach contemporary dance on Saturdays.")
    expect(page.locator("#extraction-state .last-job")).to_contain_text("finished")
    screenshot(page, "staff-extraction")


def test_pages_read_and_edit_without_javascript(browser, live_app, screenshot):
    context = browser.new_context(base_url=live_app.url, java_script_enabled=False)
    try:
        page = context.new_page()
        login(page, live_app.url, *live_app.staff, login_path="/staff/login/")
        page.goto(_thread_url(live_app))
        for region in ("#timeline", "#memories", "#summary", "#relations", "#extraction-progress"):
            expect(page.locator(region)).to_be_visible()
        message_id = live_app.seed["message_ids"][0]
        item = page.locator(f'#timeline li[data-message-id="{message_id}"]')
        item.locator("summary").click()  # <details> opens without JavaScript
        metadata = item.get_by_label("Metadata (JSON object)")
        value = metadata.input_value()
        metadata.fill(value[:-1] + ', "checked_by": "staff"}')
        with page.expect_navigation():
            item.get_by_role("button", name="Save message").click()
        expect(page.locator(".flash")).to_contain_text("Message saved.")
        expect(page.locator(f'#timeline li[data-message-id="{message_id}"] .metadata')).to_contain_text("checked_by")
        screenshot(page, "staff-thread-no-js")
    finally:
        context.close()


# --- second review: standalone images, focus after htmx saves, header counts, socket refusals ------------


def test_standalone_images_edit_and_delete_keep_keyboard_focus(logged_in_page, live_app, screenshot):
    page = logged_in_page
    thread_id = f"browser-images-{uuid.uuid4().hex[:8]}"
    image_id = f"img-{uuid.uuid4().hex[:8]}"
    status, body = live_app.api("POST", "/threads", {"thread_id": thread_id, "user_id": "browser-user"})
    assert status == 201, body
    status, body = live_app.api("POST", f"/threads/{thread_id}/images", {
        "data": base64.b64encode(samples.png(size=(320, 160))).decode(), "image_id": image_id,
        "description": "A tram map of Lisbon.", "metadata": {"source": "upload"}})
    assert status == 201, body
    page.goto(_thread_url(live_app, thread_id))
    item = page.locator(f"#image-{image_id}")
    expect(item.locator("img")).to_have_attribute("alt", "A tram map of Lisbon.")
    page.wait_for_function("id => { const img = document.querySelector(`#image-${id} img`);"
                           " return img && img.complete && img.naturalWidth === 160; }", arg=image_id)  # thumbnail
    expect(item).to_contain_text("image/png")
    expect(page.locator('#thread-counts [data-count="images"]')).to_have_text("1")
    screenshot(page, "staff-images")

    # keyboard only: open the edit form, change the description, save with Enter
    item.locator("summary").focus()
    page.keyboard.press("Enter")
    item.get_by_label("Description").fill("A metro map of Lisbon.")
    item.get_by_role("button", name="Save image").focus()
    page.keyboard.press("Enter")
    item = page.locator(f"#image-{image_id}")
    expect(item.locator(".image-description")).to_have_text("A metro map of Lisbon.")
    expect(item).to_be_focused()  # not <body>: the keyboard user stays on the record saved
    stored = live_app.python("from memory.models import SearchChunk\n"
                             f"result = SearchChunk.objects.get(record_id=key({image_id!r})).text")
    assert stored == "A metro map of Lisbon."

    # a bad value: focus goes to the field with the error
    item.locator("summary").click()
    item.get_by_label("Metadata (JSON object)").fill("[1]")
    item.get_by_role("button", name="Save image").click()
    expect(page.locator(f"#img-{image_id}-metadata")).to_be_focused()

    # delete after confirming: the region heading takes focus, the header count follows without a reload
    page.locator(f"#image-{image_id}").get_by_text("Delete image…").click()
    page.locator(f"#image-{image_id} .confirm").get_by_role("button", name="Delete image").click()
    expect(page.locator(f"#image-{image_id}")).to_have_count(0)
    expect(page.locator("#images-heading")).to_be_focused()
    expect(page.locator('#thread-counts [data-count="images"]')).to_have_text("0")

    # adding a memory focuses the new memory and moves the Memories count
    page.locator("#memories details.add summary").click()
    page.locator("#id_add-content").fill("Keeps a tram map.")
    page.get_by_role("button", name="Add memory").click()
    new = page.locator("#memories li.memory", has_text="Keeps a tram map.")
    expect(new).to_be_focused()
    expect(page.locator('#thread-counts [data-count="memories"]')).to_have_text("1")


def _listen_on(page, socket_path: str) -> list[str]:
    """Put an ``#extraction-progress`` region for ``socket_path`` on the page and run the page's script on it.

    Returns the list that collects the URL of every WebSocket the page opens.
    """
    opened: list[str] = []
    page.on("websocket", lambda socket: opened.append(socket.url))
    page.evaluate("""path => {
        const box = document.createElement("section");
        box.id = "extraction-progress"; box.dataset.socketPath = path;
        box.innerHTML = '<p data-role="status" role="status"></p><ol data-role="log"></ol>';
        document.querySelector("main").appendChild(box);
    }""", socket_path)
    page.add_script_tag(url="/static/staff/extraction.js")
    return opened


def test_a_refused_socket_says_why_and_stops_reconnecting(logged_in_page, browser, live_app):
    page = logged_in_page
    page.goto("/staff/projects/default/threads/")
    opened = _listen_on(page, "/ws/threads/no-such-thread/extraction/")
    progress = page.locator("#extraction-progress")
    expect(progress).to_have_attribute("data-socket", "refused")  # close code 4404 reached the browser
    expect(progress.locator('[data-role="status"]')).to_have_text("Live progress unavailable (no such thread).")
    page.wait_for_timeout(2500)  # past the first reconnect delay (1 s): no second attempt
    assert len(opened) == 1, opened

    anonymous = browser.new_context(base_url=live_app.url)
    try:
        page = anonymous.new_page()
        page.goto("/staff/login/")  # same origin, no session
        opened = _listen_on(page, f"/ws/threads/{live_app.seed['thread_id']}/extraction/")
        progress = page.locator("#extraction-progress")
        expect(progress).to_have_attribute("data-socket", "refused")
        expect(progress.locator('[data-role="status"]')).to_contain_text("not authorised")
        page.wait_for_timeout(2500)
        assert len(opened) == 1, opened
    finally:
        anonymous.close()
