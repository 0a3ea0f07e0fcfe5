"""Image thumbnails in the staff timeline, and a Django admin that covers every model."""

import io
import re

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.test import Client
from PIL import Image as PilImage

from memory.models import Image, Memory, Message, RecordLink, SearchChunk
from tests import image_samples as samples
from tests.ids import key

DETAIL = "/staff/projects/default/threads/t-main/"


@pytest.fixture
def pictured(thread):
    """A message of text, an image, and text again."""
    [mid] = thread.add_messages([{"role": "user", "content": [
        {"type": "text", "text": "Here is my boarding pass."},
        {"type": "image", "bytes": samples.png(size=(640, 320)), "description": "A boarding pass to Rome.",
         "id": "img-pass"},
        {"type": "text", "text": "Seat 14C."},
    ]}])
    return mid


def test_a_thumbnail_over_the_pixel_ceiling_is_refused_from_the_header_without_decoding(monkeypatch):
    """49 MP (over the 40 MP ceiling, under Pillow's own bomb limit) was decoded in full on every view."""
    from PIL import ImageFile

    from staff.thumbnails import TooManyPixels, thumbnail

    def must_not_decode(self):
        raise AssertionError(f"decoded {self.size}")

    monkeypatch.setattr(ImageFile.ImageFile, "load", must_not_decode)
    with pytest.raises(TooManyPixels, match="7000x7000 is over the 40000000-pixel ceiling"):
        thumbnail(samples.giant_header_png(7000, 7000))


def test_a_jpeg_thumbnail_decodes_at_a_reduced_scale(monkeypatch):
    from PIL import ImageFile

    from staff.thumbnails import thumbnail

    decoded = []
    load = ImageFile.ImageFile.load

    def recording_load(self):
        decoded.append(self.size)
        return load(self)

    monkeypatch.setattr(ImageFile.ImageFile, "load", recording_load)
    data, mime = thumbnail(samples.jpeg((4000, 3000)))
    assert mime == "image/png" and samples.size_of(data) == (160, 120)
    assert decoded and max(w * h for w, h in decoded) <= 500 * 375


def test_the_timeline_shows_image_thumbnails(staff, pictured):
    html = staff.get(DETAIL).content.decode()
    item = html.split(f'data-message-id="{pictured}"')[1].split("</li>\n")[0]
    assert ('<a href="/staff/projects/default/threads/t-main/images/img-pass/">'
            '<img src="/staff/projects/default/threads/t-main/images/img-pass/?thumb=1"'
            ' alt="A boarding pass to Rome."') in item
    thumb = staff.get("/staff/projects/default/threads/t-main/images/img-pass/?thumb=1")
    assert thumb["Content-Type"] == "image/png" and thumb["X-Content-Type-Options"] == "nosniff"
    with PilImage.open(io.BytesIO(thumb.content)) as picture:
        assert picture.size == (160, 80)  # longest side 160, aspect kept
    full = staff.get("/staff/projects/default/threads/t-main/images/img-pass/")
    assert full.content == samples.png(size=(640, 320)) and full["Content-Type"] == "image/png"
    assert staff.get("/staff/projects/default/threads/t-main/images/nope/").status_code == 404
    assert Client().get("/staff/projects/default/threads/t-main/images/img-pass/").status_code == 302  # staff only


def test_editing_text_parts_keeps_the_images(staff, pictured):
    html = staff.get(DETAIL).content.decode()
    assert 'name="part-0"' in html and 'name="part-2"' in html and "image <code>img-pass</code> (kept)" in html
    response = staff.post(f"{DETAIL}messages/{pictured}/edit/", {"part-0": "Here is my new boarding pass.",
                                                                 "part-2": "Seat 14C.", "metadata": ""})
    assert response.status_code == 302
    row = Message.objects.get(pk=key(pictured))
    assert [p["type"] for p in row.parts] == ["text", "image", "text"]
    assert row.parts[0]["text"] == "Here is my new boarding pass." and row.parts[1]["id"] == "img-pass"
    assert Image.objects.filter(pk=key("img-pass"), message_id=key(pictured)).exists()
    assert SearchChunk.objects.get(source_kind="message", record_id=key(pictured)).text.startswith(
        "user: Here is my new boarding pass.")


# --- admin -------------------------------------------------------------------------------------------


@pytest.fixture
def superuser_browser(db):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    browser = Client()
    browser.force_login(user)
    return browser


def project_models():
    return [m for label in ("memory", "threads") for m in apps.get_app_config(label).get_models()]


def test_every_model_has_an_admin_with_filters_and_search():
    for model in project_models():
        assert admin.site.is_registered(model), model.__name__
        model_admin = admin.site._registry[model]
        assert model_admin.list_filter, f"{model.__name__}: no list filters"
        assert model_admin.search_fields, f"{model.__name__}: no search"


def test_every_changelist_and_change_page_renders(superuser_browser, thread, pictured):
    thread.add_memory("likes Rome", memory_type="preference", memory_id="m-a")
    thread.add_memory("visits Rome in May", memory_type="fact", memory_id="m-b")
    thread.link_records("m-b", "fact", "m-a", "preference", "supports", relation_id="r-1")
    for model in project_models():
        base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        for url in (base, base + "?q=rome"):
            assert superuser_browser.get(url).status_code == 200, url
        row = model.objects.first()
        if row is not None:
            assert superuser_browser.get(f"{base}{row.pk}/change/").status_code == 200, model.__name__
    chunk_page = superuser_browser.get(f"/admin/memory/searchchunk/{SearchChunk.objects.first().pk}/change/")
    assert b"embedding" not in chunk_page.content.split(b'id="content-main"')[1]  # vectors are not shown
    assert b'name="_save"' not in chunk_page.content  # derived rows are read-only


def test_admin_memory_edits_retype_chunks_and_relations(superuser_browser, thread):
    thread.add_memory("likes Rome", memory_type="preference", memory_id="m-a")
    thread.add_memory("visits Rome in May", memory_type="fact", memory_id="m-b")
    thread.link_records("m-b", "fact", "m-a", "preference", "supersedes", relation_id="r-1")
    response = superuser_browser.post(f"/admin/memory/memory/{quote(key('m-b'))}/change/", {
        "memory_type": "memory", "content": "visits Rome in May", "metadata": "{}", "status": "valid",
        "timestamp": "", "expires_at_0": "", "expires_at_1": "",
    })
    assert response.status_code == 302
    assert SearchChunk.objects.get(record_id=key("m-b")).record_type == "memory"
    assert RecordLink.objects.get(pk=key("r-1")).source_type == "memory"
    assert Memory.objects.get(pk=key("m-a")).status == "invalid"
    # deleting the superseding memory in the admin removes the relation and revalidates its target
    assert superuser_browser.post(f"/admin/memory/memory/{quote(key('m-b'))}/delete/",
                                  {"post": "yes"}).status_code == 302
    assert not RecordLink.objects.filter(pk=key("r-1")).exists()
    assert Memory.objects.get(pk=key("m-a")).status == "valid"


def test_admin_relation_edits_keep_the_lifecycle(superuser_browser, thread):
    thread.add_memory("likes Rome", memory_type="preference", memory_id="m-a")
    thread.add_memory("visits Rome in May", memory_type="fact", memory_id="m-b")
    thread.link_records("m-b", "fact", "m-a", "preference", "supersedes", relation_id="r-1")
    assert Memory.objects.get(pk=key("m-a")).status == "invalid"
    response = superuser_browser.post(f"/admin/memory/recordlink/{quote(key('r-1'))}/change/", {
        "relation_type": "supports", "opposite_relation_type": "is_supported_by", "metadata": "{}", "timestamp": ""})
    assert response.status_code == 302, re.findall(r'class="errorlist[^"]*"><li>([^<]+)', response.content.decode())
    assert RecordLink.objects.get(pk=key("r-1")).relation_type == "supports"
    assert Memory.objects.get(pk=key("m-a")).status == "valid"


# --- record URLs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("record_id", ["mem-1", "conv-26:D1:3", "a b+c&d?é", "x%2F"])
def test_record_urls_match_what_reverse_gives(record_id):
    from urllib.parse import unquote

    from django.urls import resolve, reverse

    from staff.templatetags.staff_tags import RECORD_ROUTES, record_url

    for name in RECORD_ROUTES:
        url = record_url(name, "default", "conv-26-s1", record_id)
        assert url == reverse(f"staff:{name}", args=["default", "conv-26-s1", record_id]), name
        match = resolve(unquote(url))  # the server decodes the path before resolving it
        assert match.url_name == name and list(match.kwargs.values()) == ["default", "conv-26-s1", record_id]
