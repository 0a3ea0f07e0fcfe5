"""User and agent profiles (``memory.models.Profile``, table ``oam_profiles``): the SDK's ``add_user`` and
``add_agent`` rows, one per project, kind and subject id (``oam_profile_subject_uq``), compiled for Oracle
offline in tests/oracle/test_profiles_sql.py."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0008_project_members"),
    ]

    operations = [
        migrations.CreateModel(
            name="Profile",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("kind", models.CharField(choices=[("user", "user"), ("agent", "agent")], max_length=8)),
                ("subject_id", models.CharField(max_length=255)),
                ("information", models.TextField()),
                ("metadata", models.JSONField(blank=True, default=dict)),
                ("created_at", models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("project", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="+",
                                              to="memory.project")),
            ],
            options={
                "db_table": "oam_profiles",
                "ordering": ["created_at", "id"],
                "constraints": [models.UniqueConstraint(fields=("project", "kind", "subject_id"),
                                                        name="oam_profile_subject_uq")],
            },
        ),
    ]
