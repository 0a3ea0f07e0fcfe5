"""Staff pages: standalone images, HEAD on every page, htmx counts and focus, confirmations, filter errors.

* standalone images (``add_image``, ``POST /api/threads/{id}/images``) get an
  ``#images`` region on the thread page, with inline edit and delete through
  ``Thread.update_image`` / ``Thread.delete_image``;
* every GET view answers HEAD (``require_safe``);
* htmx writes refresh the header counts out of band (``#thread-counts``) and
  name the element to focus after the swap (``HX-Trigger-After-Settle``);
* the relation delete confirmation names both memories and the relation type;
* an invalid thread-list filter shows its error only, not "0 threads".

The WebSocket close codes are in tests/consumers; focus and the socket's
refusal text as a browser sees them are in tests/browser/test_staff_pages.py.
"""

import datetime
import json
import re

import numpy as np
import pytest
from django.utils import timezone

from memory.client import thread_images
from memory.models import Image, Memory, RecordLink, SearchChunk
from memory.services.images import image_update
from tests import image_samples as samples
from tests.ids import key

DETAIL = "/staff/projects/default/threads/t-main/"


def section(html: str, region_id: str) -> str:
    """The markup of ``<section id=region_id>`` up to its closing tag (regions do not nest sections here)."""
    match = re.search(rf'<section id="{region_id}"[^>]*>.*?</section>', html, re.S)
    assert match, f"#{region_id} missing"
    return match.group(0)


def counts(html: str) -> dict[str, str]:
    """The header counts (``data-count`` cells of ``#thread-counts``) as text."""
    block = html.split('id="thread-counts"')[1].split("</dl>")[0]
    return dict(re.findall(r'data-count="([a-z]+)">([^<]*)<', block))


def focus_of(response) -> str:
    """The DOM id a write response asks the page to focus after the swap."""
    return json.loads(response["HX-Trigger-After-Settle"])["staff-focus"]["id"]


@pytest.fixture
def imaged(thread):
    """A standalone image with metadata and a TTL, an attached one, and an expired standalone one."""
    thread.add_image(samples.png(size=(320, 160)), description="A tram map of Lisbon.", image_id="img-map",
                     metadata={"source": "upload"}, ttl_days=3)
    thread.add_messages([{"role": "user", "content": [
        {"type": "text", "text": "My ticket."},
        {"type": "image", "bytes": samples.png(size=(64, 64)), "description": "A tram ticket.", "id": "img-ticket"},
    ]}])
    thread.add_image(samples.jpeg(), description="An old photo.", image_id="img-old")
    Image.objects.filter(pk=key("img-old")).update(expires_at=timezone.now() - datetime.timedelta(days=1))
    return thread


# --- 1. standalone images ----------------------------------------------------------------------------


def test_the_thread_page_lists_standalone_images(staff, imaged):
    html = staff.get(DETAIL).content.decode()
    images = section(html, "images")
    assert '<h2 id="images-heading">Images (2)</h2>' in images
    item = images.split('data-image-id="img-map"')[1].split("</li>")[0]
    assert ('<img src="/staff/projects/default/threads/t-main/images/img-map/?thumb=1"'
            ' alt="A tram map of Lisbon."') in item
    assert "image/png" in item and re.search(r"\d+ bytes, 320×160 px", item.replace("\xa0", " "))
    assert "<code>{&quot;source&quot;: &quot;upload&quot;}</code>" in item
    expires = Image.objects.get(pk=key("img-map")).expires_at
    assert f'TTL: expires <time datetime="{expires.isoformat()}' in item
    assert 'name="description"' in item and "Delete image…" in item
    old = images.split('data-image-id="img-old"')[1].split("</li>")[0]
    assert "badge-expired" in old and "image/jpeg" in old and 'name="description"' not in old  # shown, not editable
    # an image in a message stays in the conversation only
    assert 'data-image-id="img-ticket"' not in images
    assert "/images/img-ticket/?thumb=1" in section(html, "timeline")
    assert counts(html)["images"] == "1"  # live standalone images
    assert staff.get("/staff/projects/default/threads/t-main/images/img-map/?thumb=1")["Content-Type"] == "image/png"


def test_editing_an_image_goes_through_update_image_and_re_embeds(staff, htmx, imaged, monkeypatch):
    calls = []
    update = image_update
    monkeypatch.setattr(thread_images, "image_update", lambda **kw: calls.append(kw) or update(**kw))
    before = SearchChunk.objects.get(record_id=key("img-map")).embedding.copy()
    url = f"{DETAIL}images/img-map/edit/"
    response = htmx.post(url, {"description": "A metro map of Lisbon.", "metadata": '{"source": "scan"}'})
    assert response.status_code == 200
    assert [(c["description"], c["metadata"]) for c in calls] == [("A metro map of Lisbon.", {"source": "scan"})]
    row = Image.objects.get(pk=key("img-map"))
    assert (row.description, row.metadata) == ("A metro map of Lisbon.", {"source": "scan"})
    chunk = SearchChunk.objects.get(record_id=key("img-map"))
    assert chunk.text == "A metro map of Lisbon." and chunk.metadata == {"source": "scan"}
    assert not np.allclose(chunk.embedding, before)  # re-embedded
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="images"') and "A metro map of Lisbon." in section(html, "images")
    assert focus_of(response) == "image-img-map" and 'id="image-img-map"' in html
    # unchanged values are not sent (no re-embedding); without htmx: back to the record
    calls.clear()
    again = staff.post(url, {"description": "A metro map of Lisbon.", "metadata": '{"source": "scan"}'})
    assert (again.status_code, again["Location"]) == (302, DETAIL + "#image-img-map") and calls == []
    # a blank description is sent as "": the image leaves search
    assert staff.post(url, {"description": "", "metadata": '{"source": "scan"}'}).status_code == 302
    assert Image.objects.get(pk=key("img-map")).description == ""
    assert not SearchChunk.objects.filter(record_id=key("img-map")).exists()


@pytest.mark.parametrize("metadata", ["[1, 2]", "{"])
def test_image_edit_errors_show_next_to_the_field_and_change_nothing(staff, htmx, imaged, metadata):
    for browser in (staff, htmx):
        response = browser.post(f"{DETAIL}images/img-map/edit/", {"description": "changed", "metadata": metadata})
        assert response.status_code == 422
        item = response.content.decode().split('data-image-id="img-map"')[1].split("</li>")[0]
        assert 'aria-describedby="img-img-map-metadata-errors"' in item and "<details class=\"edit\" open>" in item
        assert 'id="img-img-map-metadata-errors"' in item
    assert focus_of(response) == "image-img-map"
    row = Image.objects.get(pk=key("img-map"))
    assert (row.description, row.metadata) == ("A tram map of Lisbon.", {"source": "upload"})


def test_deleting_an_image_asks_first_then_goes_through_delete_image(staff, htmx, imaged):
    url = f"{DETAIL}images/img-map/delete/"
    page = staff.get(url)
    assert page.status_code == 200 and b"A tram map of Lisbon." in page.content and b"<html" in page.content
    fragment = htmx.get(url).content.decode()
    assert 'class="confirm card"' in fragment and 'hx-target="#images"' in fragment
    assert 'src="/staff/projects/default/threads/t-main/images/img-map/?thumb=1"' in fragment
    assert Image.objects.filter(pk=key("img-map")).exists()  # asking deletes nothing
    response = htmx.post(url)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-image-id="img-map"' not in section(html, "images")
    assert counts(html)["images"] == "0" and focus_of(response) == "images-heading"
    assert not Image.objects.filter(pk=key("img-map")).exists()
    assert not SearchChunk.objects.filter(record_id=key("img-map")).exists()
    assert staff.post(url).status_code == 404


def test_images_in_messages_and_expired_images_are_not_edited_here(staff, imaged):
    for url in (f"{DETAIL}images/img-ticket/edit/", f"{DETAIL}images/img-ticket/delete/"):
        assert staff.post(url, {"description": "x"}).status_code == 404
    assert Image.objects.get(pk=key("img-ticket")).description == "A tram ticket."
    assert staff.post(f"{DETAIL}images/img-old/delete/").status_code == 404  # the spec's delete: live ones only
    assert Image.objects.filter(pk=key("img-old")).exists()


def test_image_writes_need_a_staff_login(anon, imaged):
    assert anon.post(f"{DETAIL}images/img-map/delete/").status_code == 302
    assert anon.post(f"{DETAIL}images/img-map/edit/", {"description": "x"}).status_code == 302
    assert Image.objects.get(pk=key("img-map")).description == "A tram map of Lisbon."


# --- 2. HEAD ---------------------------------------------------------------------------------------


def test_every_page_answers_head_like_get(staff, filled):
    filled["thread"].add_image(samples.png(), description="x", image_id="img-x")
    urls = ["/staff/", "/staff/projects/default/threads/", DETAIL, DETAIL + "context-card/",
            "/staff/projects/default/search/", DETAIL + "memories/", DETAIL + "extraction/", DETAIL + "timeline/",
            DETAIL + "images/img-x/",
            DETAIL + "memories/mem-new/delete/", DETAIL + "relations/rel-1/delete/", DETAIL + "images/img-x/delete/",
            f"{DETAIL}messages/{filled['messages'][0]}/delete/"]
    for url in urls:
        get, head = staff.get(url), staff.head(url)
        assert head.status_code == get.status_code != 405, url
        assert head.content == b"", url
    assert staff.head("/staff/projects/default/threads/nope/").status_code == 404
    assert Memory.objects.filter(pk=key("mem-new")).exists() and RecordLink.objects.filter(pk=key("rel-1")).exists()


# --- 3 and 4. header counts and focus after htmx writes ------------------------------------------------


def test_htmx_writes_refresh_the_header_counts_and_name_the_focus(staff, htmx, filled):
    assert counts(staff.get(DETAIL).content.decode()) == {
        "messages": "3", "memories": "3", "relations": "1", "images": "0"}

    added = htmx.post(f"{DETAIL}memories/add/", {"add-content": "User takes the tram", "add-memory_type": "fact",
                                                 "add-status": "valid"})
    html = added.content.decode()
    assert 'id="thread-counts" hx-swap-oob="true"' in html and counts(html)["memories"] == "4"
    new_id = Memory.objects.get(content="User takes the tram").public_id
    assert focus_of(added) == f"memory-{new_id}" and f'id="memory-{new_id}"' in html

    linked = htmx.post(f"{DETAIL}relations/add/", {"rel-source_record_id": new_id, "rel-relation_type": "supports",
                                                   "rel-target_record_id": "mem-new"})
    relation_id = RecordLink.objects.get(source_id=key(new_id)).public_id
    assert counts(linked.content.decode())["relations"] == "2"
    assert focus_of(linked) == f"relation-{relation_id}" and f'id="relation-{relation_id}"' in linked.content.decode()

    edited = htmx.post(f"{DETAIL}memories/mem-pref/edit/", {"content": "User loves pastries",
                                                            "memory_type": "preference", "status": "valid"})
    assert focus_of(edited) == "memory-mem-pref" and counts(edited.content.decode())["memories"] == "4"

    removed = htmx.post(f"{DETAIL}relations/{relation_id}/delete/")
    assert counts(removed.content.decode())["relations"] == "1" and focus_of(removed) == "relations-heading"
    deleted = htmx.post(f"{DETAIL}memories/{new_id}/delete/")
    assert counts(deleted.content.decode())["memories"] == "3" and focus_of(deleted) == "memories-heading"
    assert 'id="memories-heading"' in deleted.content.decode()

    message = htmx.post(f"{DETAIL}messages/{filled['messages'][0]}/edit/", {"content": "I moved to Porto.",
                                                                           "metadata": '{"topic": "home"}'})
    assert focus_of(message) == "message-1" and 'id="message-1"' in message.content.decode()
    gone = htmx.post(f"{DETAIL}messages/{filled['messages'][2]}/delete/")
    assert counts(gone.content.decode())["messages"] == "2" and focus_of(gone) == "timeline-heading"


def test_a_failed_htmx_write_names_the_form_to_focus(htmx, filled):
    response = htmx.post(f"{DETAIL}memories/add/", {"add-content": "", "add-memory_type": "fact",
                                                    "add-status": "valid"})
    assert response.status_code == 422 and focus_of(response) == "memory-add"
    assert re.search(r'<form id="memory-add"[^>]*>.*aria-invalid="true"', response.content.decode(), re.S)
    wrong = htmx.post(f"{DETAIL}memories/mem-new/edit/", {"content": " ", "memory_type": "fact", "status": "valid"})
    assert wrong.status_code == 422 and focus_of(wrong) == "memory-mem-new"
    relation = htmx.post(f"{DETAIL}relations/add/", {"rel-relation_type": "supports"})
    assert relation.status_code == 422 and focus_of(relation) == "relation-add"


def test_the_focus_script_is_on_every_page(staff, thread):
    for url in ("/staff/projects/default/threads/", DETAIL, "/staff/projects/default/search/"):
        assert b'<script src="/static/staff/staff.js" defer></script>' in staff.get(url).content
    script = b"".join(staff.get("/static/staff/staff.js").streaming_content).decode()
    assert 'addEventListener("staff-focus"' in script and ".focus()" in script


# --- 6. relation delete confirmation -------------------------------------------------------------------


def test_the_relation_delete_confirmation_names_both_memories_and_the_type(staff, htmx, filled):
    for browser in (staff, htmx):
        html = browser.get(f"{DETAIL}relations/rel-1/delete/").content.decode()
        quote = html.split('<blockquote class="relation">')[1].split("</blockquote>")[0]
        assert re.search(r"<q>User lives in Lisbon</q>\s*<strong class=\"rel\">supersedes</strong>\s*"
                         r"<q>User lives in Porto</q>", quote), quote
        assert "RecordLink" not in html and "mem-new" not in quote
    assert RecordLink.objects.filter(pk=key("rel-1")).exists()


# --- 7. invalid thread-list filter -------------------------------------------------------------------


@pytest.mark.parametrize("browser_name", ["staff", "htmx"])
def test_an_invalid_thread_filter_shows_only_its_error(request, thread, browser_name):
    browser = request.getfixturevalue(browser_name)
    response = browser.get("/staff/projects/default/threads/", {"metadata": '{"$nope": 1}'})
    html = response.content.decode()
    assert response.status_code == 422
    assert 'id="id_metadata_error"' in html and 'aria-invalid="true"' in html
    assert "0 threads" not in html and "No thread matches" not in html and 'id="thread-list"' not in html
    valid = browser.get("/staff/projects/default/threads/", {"metadata": '{"no_such_key": 1}'}).content.decode()
    assert "0 threads" in valid and "No thread matches." in valid  # a valid filter matching nothing still says so
