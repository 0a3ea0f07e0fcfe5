"""A database remembers which embedder made its vectors, and a different one is refused (memory.E002)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from memory.checks import check_embedding_space
from memory.models import EmbeddingSpace

pytestmark = pytest.mark.django_db

E5 = "memory.embedders.E5SmallEmbedder"


def test_the_migration_recorded_the_configured_embedder():
    from django.conf import settings

    spaces = list(EmbeddingSpace.objects.values_list("embedder", "dimensions"))
    assert spaces == [(settings.OAM_EMBEDDER, settings.OAM_EMBEDDING_DIMENSIONS)]


def test_the_embedder_that_made_the_vectors_passes():
    assert check_embedding_space(databases=["default"]) == []


@pytest.mark.parametrize("changed", [{"OAM_EMBEDDER": E5}, {"OAM_EMBEDDING_DIMENSIONS": 768}])
def test_another_embedder_or_size_is_refused_naming_both(changed):
    with override_settings(**changed):
        errors = check_embedding_space(databases=["default"])
    assert [e.id for e in errors] == ["memory.E002"]
    assert "MiniLMEmbedder" in errors[0].msg and "export_memory" in errors[0].hint
    if "OAM_EMBEDDER" in changed:
        assert E5 in errors[0].msg


def test_manage_py_check_with_the_database_stops_on_it_and_plain_check_does_not_read_it():
    with override_settings(OAM_EMBEDDER=E5):
        with pytest.raises(SystemCheckError, match="memory.E002"):
            call_command("check", databases=["default"])
        call_command("check")  # no database named: database checks do not run


def test_no_databases_or_no_record_passes():
    assert check_embedding_space(databases=None) == []
    EmbeddingSpace.objects.all().delete()
    with override_settings(OAM_EMBEDDER=E5):
        assert check_embedding_space(databases=["default"]) == []
