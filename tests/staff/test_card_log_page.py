"""The staff page "card at a moment" (issue #32, part 3): the cards logged for a thread and the one served at or
before a chosen moment, as it was served."""

import datetime as dt

from django.utils import timezone
from django.utils.html import escape

PAGE = "/staff/projects/default/threads/t-main/context-card/log/"


def test_the_page_lists_logged_cards_and_shows_the_one_served_then(staff, htmx, filled):
    thread = filled["thread"]
    first = thread.get_context_card()
    at = timezone.now()
    thread.add_memory("The user bought a bicycle in Lisbon")
    second = thread.get_context_card(max_recent_messages=1)
    assert first.content != second.content
    html = staff.get(PAGE).content.decode()
    assert html.count("<tr><td>") == 2 and "max_recent_messages" in html
    shown = htmx.get(PAGE, {"at": at.strftime("%Y-%m-%dT%H:%M:%S.%f")})
    fragment = shown.content.decode()
    assert shown.status_code == 200 and fragment.lstrip().startswith('<div id="card-log">')
    body = fragment.split('<pre id="logged-card"')[1].split(">", 1)[1].split("</pre>")[0]
    assert body == escape(first.content)
    early = staff.get(PAGE, {"at": (at - dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S")}).content.decode()
    assert "No card was served for this thread at or before that moment." in early
    bad = staff.get(PAGE, {"at": "soon"})
    assert bad.status_code == 422 and "ISO-8601" in bad.content.decode()


def test_the_thread_page_links_to_it(staff, thread):
    assert PAGE in staff.get("/staff/projects/default/threads/t-main/").content.decode()


def test_the_page_shows_the_threads_memories_as_they_were_then(staff, filled):
    """The time slider's other half (issue #32, part 3): the memories at the chosen moment, from their history."""
    thread = filled["thread"]
    thread.add_memory("Lives in Lyon", memory_id="m-then")
    thread.add_memory("Owns a red bike", memory_id="m-gone")
    at = timezone.now()
    thread.update_memory("m-then", content="Lives in Paris")
    thread.delete_memory("m-gone")
    thread.add_memory("Learns Portuguese", memory_id="m-later")
    html = staff.get(PAGE, {"at": at.strftime("%Y-%m-%dT%H:%M:%S.%f")}).content.decode()
    then = html.split('id="memories-then"')[1].split("</section>")[0]
    assert "Lives in Lyon" in then and "Lives in Paris" not in then  # edited since: undone
    assert "Owns a red bike" in then  # deleted since: present
    assert "Learns Portuguese" not in then  # created later: absent
    now = staff.get(PAGE, {"at": timezone.now().strftime("%Y-%m-%dT%H:%M:%S.%f")}).content.decode()
    assert "Lives in Paris" in now.split('id="memories-then"')[1].split("</section>")[0]
