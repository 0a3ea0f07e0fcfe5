"""``/api/docs`` and ``/api/openapi.json`` answer without a key, and the docs page loads nothing from other hosts."""

import json
import re


def test_the_docs_page_uses_the_apps_own_swagger_ui_and_no_other_host(anon):
    resp = anon.get("/api/docs")
    assert resp.status_code == 200
    html = resp.content.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert "/static/ninja/swagger-ui-bundle.js" in sources and "/static/ninja/swagger-ui.css" in sources
    assert not [s for s in sources if "//" in s], sources  # nothing absolute: no CDN
    settings = json.loads(re.search(r'id="swagger-settings">(.*?)</script>', html, re.S)[1])
    assert settings["url"] == "/api/openapi.json"
    assert settings["validatorUrl"] == "none"  # no badge image from validator.swagger.io


def test_the_schema_answers_without_a_key(anon):
    resp = anon.get("/api/openapi.json")
    assert resp.status_code == 200 and resp.json()["info"]["title"] == "OAM Site API"


def test_operation_ids_name_the_api_package_and_tags_the_resource_router(anon):
    """An operationId is ``threads_api_<function>`` whichever resource module holds the route (so moving a route
    between modules renames nothing a generated client calls); each operation is tagged with its router's tag."""
    from threads.api.routes import ROUTERS

    expected = {}
    for router in ROUTERS:
        for view in router.path_operations.values():
            for op in view.operations:
                expected[f"threads_api_{op.view_func.__name__}"] = router.tags
    operations = [op for ops in anon.get("/api/openapi.json").json()["paths"].values() for op in ops.values()]
    assert len(operations) == len(expected) == 56
    assert {op["operationId"]: op["tags"] for op in operations} == expected
