"""The search playground and the context-card preview through the Django test client."""

import re

import pytest

SEARCH = "/staff/projects/default/search/"
CARD = "/staff/projects/default/threads/t-main/context-card/"


def results(html: str) -> list[tuple[str, str]]:
    return re.findall(r'<li class="result" data-record-id="([^"]+)" data-record-type="([^"]+)">', html)


def field_errors(html: str, field_id: str) -> str:
    """The text of the field group (``<div class="field">``) holding the input with this id."""
    before, after = html.split(f'id="{field_id}"', 1)
    return before.rsplit('<div class="field', 1)[1] + after.split("</div>", 1)[0]


def test_the_playground_starts_empty(staff, db):
    html = staff.get(SEARCH).content.decode()
    assert 'id="search-results"' in html and "Type a query and search." in html
    assert 'name="include_invalid_results" id="id_include_invalid_results" checked' in html  # spec default


def test_results_are_ranked_with_scores_and_where_they_came_from(staff, filled):
    response = staff.get(SEARCH, {"query": "where does the user live", "user_id": "user-1", "max_results": "5",
                                  "include_invalid_results": "on"})
    html = response.content.decode()
    assert response.status_code == 200
    found = results(html)
    assert 0 < len(found) <= 5
    expected = filled["thread"].search("where does the user live", max_results=5)
    assert [record_id for record_id, _ in found] == [r.record_id for r in expected]  # the engine's order
    first = html.split('<li class="result"')[1]
    assert f"score <strong>{expected[0].score:.4f}</strong>" in first
    assert f"distance {expected[0].distance:.4f}" in first
    assert 'thread <a href="/staff/projects/default/threads/t-main/' in first and "user user-1" in first


def test_record_types_metadata_filter_and_invalid_records(staff, filled):
    html = staff.get(SEARCH, {"query": "user", "record_types": ["fact"], "max_results": "10"}).content.decode()
    assert {kind for _, kind in results(html)} == {"fact"}
    assert "mem-old" not in [rid for rid, _ in results(html)]  # unticked box: include_invalid_results=False
    html = staff.get(SEARCH, {"query": "user", "record_types": ["fact"], "include_invalid_results": "on"}).content
    assert {"mem-old", "mem-new"} <= {rid for rid, _ in results(html.decode())}
    html = staff.get(SEARCH, {"query": "Lisbon", "metadata_filter": '{"topic": "home"}',
                              "include_invalid_results": "on"}).content.decode()
    assert [rid for rid, _ in results(html)] == [filled["messages"][0]]


def test_linked_memories_are_shown_with_hops(staff, filled):
    html = staff.get(SEARCH, {"query": "User lives in Lisbon", "record_types": ["fact"], "num_hops": "1",
                              "include_invalid_results": "on", "max_results": "1"}).content.decode()
    assert results(html) == [("mem-new", "fact")]
    linked = html.split('<ul class="linked"')[1].split("</ul>")[0]
    assert "1 hop via <strong>supersedes</strong>: User lives in Porto" in linked


@pytest.mark.parametrize(("params", "field", "message"), [
    ({"query": ""}, "id_query", "This field is required"),
    ({"query": "x", "max_results": "0"}, "id_max_results", "max_results"),
    ({"query": "x", "num_hops": "9"}, "id_num_hops", "num_hops"),
    ({"query": "x", "metadata_filter": '{"a": {"$nope": 1}}'}, "id_metadata_filter", "metadata_filter.a"),
    ({"query": "x", "metadata_filter": "[]"}, "id_metadata_filter", "must be a JSON object"),
])
def test_search_errors_show_next_to_their_field(staff, htmx, filled, params, field, message):
    for browser in (staff, htmx):
        response = browser.get(SEARCH, params)
        assert response.status_code == 422
        html = response.content.decode()
        assert message in field_errors(html, field)
        assert "Type a query and search." in html


def test_htmx_gets_the_search_panel(htmx, filled):
    response = htmx.get(SEARCH, {"query": "pastries"})
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="search-panel">') and "<html" not in html
    assert results(html)[0] == ("mem-pref", "preference")
    assert "HX-Request" in response["Vary"]


def test_the_thread_page_links_a_scoped_search(staff, filled):
    html = staff.get("/staff/projects/default/search/?thread_id=t-main").content.decode()
    assert 'name="thread_id" value="t-main"' in html


# --- context card --------------------------------------------------------------------------------


def card_text(html: str) -> str:
    body = html.split('<pre id="context-card"')[1].split(">", 1)[1].split("</pre>")[0]
    return body.replace("&lt;", "<").replace("&gt;", ">").replace("&#x27;", "'").replace("&quot;", '"')


def test_the_card_with_spec_defaults(staff, filled):
    response = staff.get(CARD)
    assert response.status_code == 200
    text = card_text(response.content.decode())
    expected = filled["thread"].get_context_card().content
    assert text == expected
    assert text.startswith("<context_card>") and "<summary>" in text and "<relevant_information>" in text
    assert "<recent_messages>" not in text  # max_recent_messages defaults to 0


def test_card_options_are_passed_through(staff, htmx, filled):
    params = {"preview": "1", "max_recent_messages": "2", "max_relevant_results": "1", "min_preference": "1",
              "include_invalid_results": "on"}
    for browser in (staff, htmx):
        html = browser.get(CARD, params).content.decode()
        text = card_text(html)
        assert text == filled["thread"].get_context_card(
            max_recent_messages=2, max_relevant_results=1, min_relevant_results_by_type={"preference": 1}).content
        assert text.count("<message>") == 2 and "<preference>" in text
    assert htmx.get(CARD, params).content.decode().lstrip().startswith('<div id="card-panel">')


def test_card_errors_show_next_to_their_field(staff, htmx, filled):
    params = {"preview": "1", "except_last_messages": "1", "max_recent_messages": "2"}
    for browser in (staff, htmx):
        response = browser.get(CARD, params)
        html = response.content.decode()
        assert response.status_code == 422
        assert "must be 0 or equal to except_last_messages" in field_errors(html, "id_max_recent_messages")
        assert 'id="context-card"' not in html
    response = staff.get(CARD, {"preview": "1", "fallback_message_count": "-1"})
    assert response.status_code == 422
    assert "fallback_message_count" in field_errors(response.content.decode(), "id_fallback_message_count")
