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


#: Longest path under ``/docs/`` looked up, in characters: the site's own are under 40; a longer one is a 404
#: before it reaches the file system (5,000 characters had answered 500: "File name too long").
MAX_PATH_CHARS = 512


def site_file(root: Path, path: str) -> Path | None:
    """The file of the built site at ``root`` that ``path`` (the URL path after ``/docs/``) names, or None.

    ``""`` names ``index.html``. None, answered as a 404 without a logged traceback, for a path that is too long
    (``MAX_PATH_CHARS``), has a ``..``, ``.`` or empty segment (a trailing or doubled ``/``: the site's pages are
    ``.html`` files, so ``api.html/`` would render unstyled), holds a NUL, is not a regular file, or resolves,
    through a symlink, outside ``root``: only the built site's own files are ever served.
    """
    if len(path) > MAX_PATH_CHARS or "\0" in path or (path and {"", ".", ".."} & set(path.split("/"))):
        return None
    try:
        base = root.resolve()
        found = (base / (path or "index.html")).resolve()
        if not found.is_relative_to(base) or not found.is_file():
            return None
    except (OSError, ValueError):
        return None
    return found


@require_safe
def docs_site(request: HttpRequest, path: str = "") -> HttpResponse:
    """A file of the built site (``site_file``; ``index.html`` for ``/docs/``), 404 for any other path; the page
    above when unbuilt."""
    root = Path(settings.OAM_DOCS_SITE_DIR)
    if not (root / "index.html").is_file():
        return HttpResponseNotFound(NOT_BUILT.format(site=escape(str(root))))
    found = site_file(root, path)
    if found is None:
        return HttpResponseNotFound("Not found")
    base = root.resolve()
    return serve(request, found.relative_to(base).as_posix(), document_root=str(base))
