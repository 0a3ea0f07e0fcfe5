"""``oam_embedding_space``: which embedder made this database's vectors (``memory.models.EmbeddingSpace``).

The row records ``settings.OAM_EMBEDDER`` at migration time: for a database made before this migration
that is the embedder that filled it (``memory.embedders.MiniLMEmbedder`` was the only one). Oracle DDL
compiled offline with every other migration in tests/oracle/test_migrations_ddl.py.
"""

import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def record_embedder(apps, schema_editor):
    EmbeddingSpace = apps.get_model("memory", "EmbeddingSpace")
    if not EmbeddingSpace.objects.using(schema_editor.connection.alias).exists():
        EmbeddingSpace.objects.using(schema_editor.connection.alias).create(
            embedder=settings.OAM_EMBEDDER, dimensions=settings.OAM_EMBEDDING_DIMENSIONS)


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0012_memory_review'),
    ]

    operations = [
        migrations.CreateModel(
            name='EmbeddingSpace',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('embedder', models.CharField(max_length=200)),
                ('dimensions', models.PositiveIntegerField()),
                ('recorded_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'db_table': 'oam_embedding_space',
            },
        ),
        migrations.RunPython(record_embedder, migrations.RunPython.noop),
    ]
