"""Access records without a project keep no thread or record id (found by a security review).

A request refused before its key was known (401, a WebSocket's 4401) was
recorded with the thread and record ids of its path and no project; an
erasure, which clears ids per project, could not find them. ``threads.audit``
no longer stores them; this clears those already stored. Plain UPDATE: the
same on Oracle.
"""

from django.db import migrations


def clear_ids(apps, schema_editor):
    AccessRecord = apps.get_model("threads", "AccessRecord")
    AccessRecord.objects.using(schema_editor.connection.alias).filter(project__isnull=True).exclude(
        thread_id__isnull=True, record_id__isnull=True).update(thread_id=None, record_id=None)


class Migration(migrations.Migration):

    dependencies = [
        ("threads", "0003_access_log"),
    ]

    operations = [
        migrations.RunPython(clear_ids, migrations.RunPython.noop),
    ]
