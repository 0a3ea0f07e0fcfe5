"""Erasure: receipts, and FTS5 ``secure-delete`` on the keyword index (SQLite).

With ``secure-delete`` an FTS5 delete removes the row's terms from the index
at once, instead of leaving them in older segments until a merge (the issue
found deleted words in the file after ``VACUUM``). The option is stored in the
FTS table itself; ``optimize`` then rewrites the index once, dropping what
earlier deletes left behind. Nothing to do on Oracle (``memory.erasure.storage_scrub``
optimizes its Oracle Text indexes after each erasure).
"""

import uuid

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

FTS = "oam_search_chunks_fts"


def fts_secure_delete(on: bool):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "sqlite":
            return
        schema_editor.execute(f"INSERT INTO {FTS}({FTS}, rank) VALUES ('secure-delete', {int(on)})", params=None)
        if on:
            schema_editor.execute(f"INSERT INTO {FTS}({FTS}) VALUES ('optimize')", params=None)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0006_projects"),
    ]

    operations = [
        migrations.CreateModel(
            name="ErasureReceipt",
            fields=[
                ("id", models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ("subject", models.CharField(choices=[("user", "user"), ("agent", "agent")], max_length=8)),
                ("subject_digest", models.CharField(db_index=True, max_length=64)),
                ("cascade", models.BooleanField(default=True)),
                ("counts", models.JSONField(blank=True, default=dict)),
                ("storage", models.JSONField(blank=True, default=dict)),
                ("requested_by", models.CharField(blank=True, default="", max_length=200)),
                ("requested_at", models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                ("completed_at", models.DateTimeField(blank=True, null=True)),
                ("project", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="+",
                                              to="memory.project")),
            ],
            options={"db_table": "oam_erasure_receipts", "ordering": ["-requested_at"]},
        ),
        migrations.RunPython(fts_secure_delete(True), fts_secure_delete(False)),
    ]
