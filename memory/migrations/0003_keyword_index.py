from django.db import migrations

import memory.operations


class Migration(migrations.Migration):
    """Keyword index over search chunks: FTS5 (SQLite) / Oracle Text (Oracle)."""

    dependencies = [
        ("memory", "0002_searchchunk_vector_index"),
    ]

    operations = [
        memory.operations.CreateKeywordIndex(
            model_name="searchchunk", name="oam_search_chunks_fts", fields=["text", "context"]
        ),
    ]
