"""The documentation site: ``docs/`` builds with ``mkdocs build --strict`` (``mkdocs.yml``), a broken link fails
that build, and the app serves the built site at ``/docs/``, which the staff header links to.

``make test`` runs the same strict build before the suite (``Makefile``, target ``docs``), so CI fails on a
broken link or anchor or a page left out of the nav even before this test runs.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from memory.records.tenancy import get_project
from tests.docs.blocks import DOCS, ROOT


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of ``config`` into ``site`` (never ``-q``: MkDocs 1.6 then counts no warnings)."""
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          cwd=config.parent, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built strictly from this checkout's ``docs/``."""
    site = tmp_path_factory.mktemp("site")
    result = build(ROOT / "mkdocs.yml", site)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "WARNING" not in result.stderr, result.stderr[-4000:]
    return site


def test_every_page_is_built(site):
    assert sorted(p.stem for p in DOCS.glob("*.md")) == sorted(p.stem for p in site.glob("*.html") if p.stem != "404")


@pytest.mark.parametrize("breakage, named", [
    (("(api.md)", "(no-such-page.md)"), "no-such-page.md"),
    (("(benchmarks.md#set-up)", "(benchmarks.md#no-such-anchor)"), "no-such-anchor"),
])
def test_a_broken_link_fails_the_strict_build(tmp_path, breakage, named):
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(DOCS, tmp_path / "docs")
    index = tmp_path / "docs" / "index.md"
    text = index.read_text()
    assert breakage[0] in text
    index.write_text(text.replace(breakage[0], breakage[1], 1))
    result = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0 and named in result.stderr and "strict mode" in result.stdout + result.stderr


def test_a_page_left_out_of_the_nav_fails_the_strict_build(tmp_path):
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(DOCS, tmp_path / "docs")
    (tmp_path / "docs" / "orphan.md").write_text("# Orphan\n")
    result = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0 and "orphan.md" in result.stderr


@pytest.fixture
def staff(db) -> Client:
    user = get_user_model().objects.create_user("docs-reader", password="pw-for-tests-only", is_staff=True)
    get_project(None).members.add(user)
    browser = Client()
    browser.force_login(user)
    return browser


def test_the_staff_header_links_to_the_docs_which_answer_once_built(staff, site, settings):
    page = staff.get("/staff/projects/")
    assert page.status_code == 200 and b'<a href="/docs/">Docs</a>' in page.content
    settings.OAM_DOCS_SITE_DIR = site
    index = Client().get("/docs/")  # public, as /api/docs is
    assert index.status_code == 200 and b"OAM Site" in b"".join(index.streaming_content)
    api = Client().get("/docs/api.html")
    assert api.status_code == 200 and b'id="limits"' in b"".join(api.streaming_content)
    assert Client().get("/docs/no-such-page.html").status_code == 404
    # A path out of the site is refused (a 404, no traceback in the log), never served.
    assert Client(raise_request_exception=False).get("/docs/../mkdocs.yml").status_code == 404


@pytest.mark.parametrize("path", [
    "a" * 5000,                       # had answered 500: OSError "File name too long"
    "a/" * 3000, "b" * 300 + ".html", "%2e" * 3000,
    "../mkdocs.yml", "css/../../mkdocs.yml", "..%2fmkdocs.yml", "%2e%2e/mkdocs.yml",
    "api.html/", "api.html//", "index.html/.",   # a page with a trailing slash rendered unstyled
    "pw.txt", "up/README.md",                    # symlinks out of the site
    "x%00.html",
])
def test_only_the_sites_own_files_are_served_and_no_path_is_a_500(db, site, settings, tmp_path, path):
    """A new user's attack on /docs/ (issue #33): long paths answered 500, symlinks in the site were followed out
    of it, and each ``..`` logged a 40-line traceback while answering 400."""
    built = tmp_path / "built"
    shutil.copytree(site, built)
    (built / "pw.txt").symlink_to(ROOT / "mkdocs.yml")
    (built / "up").symlink_to(ROOT)
    settings.OAM_DOCS_SITE_DIR = built
    response = Client(raise_request_exception=False).get("/docs/" + path)
    assert response.status_code == 404
    assert Client().get("/docs/api.html").status_code == 200  # the site itself still answers


def test_before_a_build_the_docs_say_how_to_build_them(db, settings, tmp_path):
    settings.OAM_DOCS_SITE_DIR = tmp_path / "unbuilt"
    response = Client().get("/docs/")
    assert response.status_code == 404 and b"make docs" in response.content
    assert Client().get("/docs/api.html").status_code == 404
