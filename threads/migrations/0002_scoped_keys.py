"""Scoped API keys: project, permission, fixed user/agent, expiry, revocation and use times.

Keys made before belong to the ``default`` project (pk 1, ``memory`` 0006) and
keep what they could do: ``write`` (read and write every record of it).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0006_projects"),
        ("threads", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="apikey",
            name="project",
            field=models.ForeignKey(default=1, on_delete=django.db.models.deletion.PROTECT, related_name="api_keys",
                                    to="memory.project"),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="apikey",
            name="permission",
            field=models.CharField(choices=[("read", "read"), ("write", "write"), ("admin", "admin")], default="write",
                                   help_text="read: reads and searches; write: also creates, changes and deletes "
                                             "records; admin: also manages the project's keys and erases users and "
                                             "agents.", max_length=8),
        ),
        migrations.AddField(
            model_name="apikey",
            name="user_id",
            field=models.CharField(blank=True, help_text="When set, the key acts for this end user only.",
                                   max_length=255, null=True),
        ),
        migrations.AddField(
            model_name="apikey",
            name="agent_id",
            field=models.CharField(blank=True, help_text="When set, the key acts for this agent only.",
                                   max_length=255, null=True),
        ),
        migrations.AddField(
            model_name="apikey",
            name="expires_at",
            field=models.DateTimeField(blank=True, help_text="Refused from this moment on (empty: never).",
                                       null=True),
        ),
        migrations.AlterField(
            model_name="apikey",
            name="is_active",
            field=models.BooleanField(default=True, help_text="False once revoked."),
        ),
        migrations.AddField(
            model_name="apikey",
            name="revoked_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="apikey",
            name="last_used_at",
            field=models.DateTimeField(blank=True, help_text="Updated at most once a minute.", null=True),
        ),
        migrations.AddField(
            model_name="apikey",
            name="rotated_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="apikey",
            name="created_by",
            field=models.CharField(blank=True, default="",
                                   help_text='Who created it: "manage.py", "admin:<username>" or "api-key:<id>".',
                                   max_length=200),
        ),
    ]
