"""Loading the embedder writes nothing to stderr: transformers' "Loading weights: 100%" bar was shown to every
script and ``manage.py shell`` session that searched or stored (issue #33: a newcomer read it as an error)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.browser.harness import ROOT

pytestmark = pytest.mark.slow

_LOAD = """
import django
django.setup()
from memory.embedders import MiniLMEmbedder
print(MiniLMEmbedder().embed(["hello"]).shape)
"""


def test_loading_the_embedder_draws_no_progress_bar(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OAM_", "DJANGO_", "HF_", "TRANSFORMERS_"))}
    env.update(DJANGO_SETTINGS_MODULE="oam_site.settings", OAM_VAR_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", _LOAD], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "(1, 384)"
    assert "Loading weights" not in result.stderr and "it/s" not in result.stderr, result.stderr[-2000:]
    assert result.stderr == "", result.stderr[-2000:]
