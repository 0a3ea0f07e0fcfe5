"""Vector index on ``oam_search_chunks.embedding`` (Oracle only).

HNSW with an IVF fallback when the vector pool is not configured
(``memory.operations.CreateVectorIndex``, Oracle AI Vector Search User's Guide).
DISTANCE COSINE matches ``memory.search``'s ``VectorDistance`` metric, so the
optimizer can use the index. A no-op on SQLite (sqlite-vec brute force).
"""

from django.db import migrations

import memory.operations


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0001_initial"),
    ]

    operations = [
        memory.operations.CreateVectorIndex(
            model_name="searchchunk",
            name="oam_chunk_vec_ix",
            field="embedding",
            metric="COSINE",
        ),
    ]
