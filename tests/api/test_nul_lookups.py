"""U+0000 in a lookup value (an id in the path, a list filter, a search scope) is a 422 naming the field.

No record can hold NUL (``memory.core.errors.check_text`` refuses it in every write), and PostgreSQL refuses it
in any text it is handed, lookups included ("text fields cannot contain NUL (0x00) bytes"): found by an attack
on the PostgreSQL backend, where these answered 500. ``oam_site.api.data_error`` maps it.
"""

import pytest

pytestmark = pytest.mark.backend("postgresql")


@pytest.fixture
def thread_id(make_thread):
    return make_thread(thread_id="t-nul", user_id="u1", agent_id="a1")["thread_id"]


@pytest.mark.parametrize(("method", "url", "body", "loc"), [
    ("get", "/api/threads?user_id=a%00b", None, ["query", "user_id"]),
    ("get", "/api/memories?user_id=a%00b", None, ["query", "user_id"]),
    ("get", "/api/threads/a%00b", None, ["path", "thread_id"]),
    ("get", "/api/threads/t-nul/memories/a%00b", None, ["path", "memory_id"]),
    ("post", "/api/search", {"query": "zebra", "user_id": "a\x00b"}, ["body", "user_id"]),
    ("post", "/api/search", {"query": "zebra", "scope": {"user_id": "a\x00b"}}, ["body", "scope.user_id"]),
    ("post", "/api/threads/t-nul/search", {"query": "zebra", "user_id": "a\x00b"}, ["body", "user_id"]),
])
def test_a_nul_in_a_lookup_is_a_422_naming_the_field(api, thread_id, method, url, body, loc):
    resp = api.get(url) if method == "get" else api.post(url, body)
    assert resp.status_code == 422, resp.content
    (error,) = resp.json()["detail"]
    assert error["loc"] == loc and "U+0000" in error["msg"]
