"""Valid time on the staff pages (issue #32): the thread page shows a memory's validity window, and the memory
forms add and edit it through the services (an edit's error lands on the field it names)."""

import datetime as dt

from memory.models import Memory
from tests.ids import key

DETAIL = "/staff/projects/default/threads/t-main/"
UTC = dt.timezone.utc


def edit(browser, memory_id, **data):
    fields = {"content": "Lives in Lyon", "memory_type": "memory", "status": "valid", "ttl_days": "",
              "ttl_anchor": ""}
    return browser.post(f"{DETAIL}memories/{memory_id}/edit/", {**fields, **data})


def window(memory_id):
    row = Memory.objects.get(pk=key(memory_id))
    return row.valid_from, row.valid_to


def test_the_page_shows_and_the_forms_add_and_edit_the_window(staff, thread):
    answer = staff.post(f"{DETAIL}memories/add/", {"add-content": "Lives in Lyon", "add-memory_type": "memory",
                                                   "add-status": "valid", "add-valid_to": "2024-06-01"})
    assert answer.status_code == 302, answer.content[:500]
    (row,) = Memory.objects.all()
    assert window(row.public_id) == (None, dt.datetime(2024, 6, 1, tzinfo=UTC))
    page = staff.get(DETAIL).content.decode()
    assert 'class="valid-time"' in page and "until <time datetime=\"2024-06-01T00:00:00+00:00\"" in page
    assert 'name="valid_to" value="2024-06-01T00:00:00+00:00"' in page
    assert edit(staff, row.public_id, valid_from="2020-01-01", valid_to="2024-06-01T00:00:00+00:00").status_code == 302
    assert window(row.public_id) == (dt.datetime(2020, 1, 1, tzinfo=UTC), dt.datetime(2024, 6, 1, tzinfo=UTC))
    assert [v.changed for v in thread.get_memory_history(row.public_id)][-1] == ["valid_from"]
    assert edit(staff, row.public_id).status_code == 302  # a post without the fields keeps the window
    assert window(row.public_id) == (dt.datetime(2020, 1, 1, tzinfo=UTC), dt.datetime(2024, 6, 1, tzinfo=UTC))
    assert edit(staff, row.public_id, valid_from="", valid_to="").status_code == 302  # empty: open
    assert window(row.public_id) == (None, None)


def test_a_bad_bound_is_shown_next_to_its_field(htmx, thread):
    mid = thread.add_memory("Lives in Lyon", valid_from="2020-01-01")
    answer = edit(htmx, mid, valid_from="2020-01-01", valid_to="2019-01-01")
    assert answer.status_code == 422
    assert 'id="mem-' in answer.content.decode() and "valid-to-errors" in answer.content.decode()
    answer = edit(htmx, mid, valid_from="not a date")
    assert answer.status_code == 422 and "valid-from-errors" in answer.content.decode()
    assert window(mid) == (dt.datetime(2020, 1, 1, tzinfo=UTC), None)


def test_an_unreadable_bound_on_an_open_side_is_refused_not_dropped(htmx, thread):
    """An outside attack: on a memory without ``valid_to``, ``valid_to=2026-13-45`` was read as None, equal to the
    stored None, so the edit answered "Memory saved." and dropped the field; now the service names it."""
    mid = thread.add_memory("Lives in Lyon")
    for bad in ("2026-13-45", "2026-01-01T00:00:00+24:00", "٢٠٢٦-٠١-٠١"):
        answer = edit(htmx, mid, valid_to=bad)
        assert answer.status_code == 422 and "valid-to-errors" in answer.content.decode(), bad
    assert window(mid) == (None, None)
