"""``/docs/``: the documentation site, ``docs/*.md`` built by MkDocs (``mkdocs.yml``) into ``OAM_DOCS_SITE_DIR``
(default ``var/docs``; ``make docs``, ``make serve`` and ``make test`` build it), served as files.

Public, as the API's own docs at ``/api/docs`` are: the pages hold nothing of a project. Before a build,
every path answers 404 with a page that says how to build the site. The site's theme has inline scripts
(its search), so ``/docs/`` is left out of the staff pages' Content-Security-Policy (``settings``).
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseNotFound
from django.utils.html import escape
from django.views.decorators.http import require_safe
from django.views.static import serve

NOT_BUILT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Documentation not built · OAM Site</title></head>
<body><main><h1>The documentation is not built yet</h1>
<p>Run <code>make docs</code> at the repository root (<code>make serve</code> does too): it builds
<code>docs/</code> into <code>{site}</code>, which this page then serves. The same pages are readable as
Markdown in the repository's <code>docs/</code> folder.</p></main></body></html>
"""


@require_safe
def docs_site(request: HttpRequest, path: str = "") -> HttpResponse:
    """A file of the built site (``index.html`` for ``/docs/``), 404 for a missing one; the page above when unbuilt."""
    root = Path(settings.OAM_DOCS_SITE_DIR)
    if not (root / "index.html").is_file():
        return HttpResponseNotFound(NOT_BUILT.format(site=escape(str(root))))
    return serve(request, path or "index.html", document_root=str(root))
