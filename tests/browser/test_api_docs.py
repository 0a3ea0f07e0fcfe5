"""The API docs (``/api/docs``, Swagger UI) render in Chromium with no network but the server's own.

Every request the page makes to a host other than 127.0.0.1/localhost is
aborted and recorded: the docs must need none of them (django-ninja's
bundled Swagger UI, served by WhiteNoise from the collected static files of
the live server, instead of a CDN), and every operation of ``/api/openapi.json``
must be listed.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from playwright.sync_api import expect

LOCAL_HOSTS = {"127.0.0.1", "localhost"}
ASSETS = ("swagger-ui.css", "swagger-ui-bundle.js", "swagger-ui-init.js")


def cut_off(page) -> list[str]:
    """Abort every request of ``page``'s context to a host other than 127.0.0.1/localhost; return the
    list the aborted URLs are appended to."""
    aborted: list[str] = []

    def only_local(route):
        url = urlsplit(route.request.url)
        if url.scheme in ("http", "https", "ws", "wss") and url.hostname not in LOCAL_HOSTS:
            aborted.append(route.request.url)
            route.abort("internetdisconnected")
        else:
            route.continue_()

    page.context.route("**/*", only_local)
    return aborted


def test_the_api_docs_list_every_operation_with_the_network_cut_off(page, live_app, screenshot):
    status, _, body = live_app.get("/api/openapi.json")
    assert status == 200
    operations = [(method.upper(), path) for path, ops in json.loads(body)["paths"].items() for method in ops]
    assert len(operations) > 25  # threads, messages, memories, images, links, search, summary, card, extraction

    aborted, responses = cut_off(page), {}
    page.on("response", lambda r: responses.__setitem__(urlsplit(r.url).path, r.status))
    page.goto("/api/docs")

    blocks = page.locator(".opblock")
    expect(blocks).to_have_count(len(operations), timeout=30_000)
    shown = {(b.locator(".opblock-summary-method").inner_text().strip(),
              b.locator(".opblock-summary-path").get_attribute("data-path")) for b in blocks.all()}
    assert shown == set(operations)
    expect(page.locator(".info .title")).to_contain_text("OAM Site API")
    expect(page.get_by_role("button", name="Authorize")).to_be_visible()  # the Bearer key scheme
    page.wait_for_load_state("networkidle")
    screenshot(page, "api-docs")

    assert aborted == [], f"the docs page needed hosts other than the server: {aborted}"
    for asset in ASSETS:  # from the app itself, not a CDN
        assert responses.get(f"/static/ninja/{asset}") == 200, responses
        assert (live_app.directory / "static" / "ninja" / asset).is_file()  # collected by `collectstatic`
    assert responses.get("/api/openapi.json") == 200
    assert "/api/docs" in page.url


def test_a_request_to_another_host_is_aborted_and_recorded(page, live_app):
    """The cut-off above really cuts: a page that asks the Internet for a script gets nothing."""
    aborted = cut_off(page)
    page.goto("/api/docs")
    loaded = page.evaluate("""() => new Promise((resolve) => {
        const s = document.createElement("script");
        s.src = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js";
        s.onload = () => resolve(true); s.onerror = () => resolve(false);
        document.head.appendChild(s);
    })""")
    assert loaded is False and aborted == ["https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js"]
