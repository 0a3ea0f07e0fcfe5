"""Staff by project: ``Project.members``, the staff users who may see a project.

The through table is Django's, ``oam_projects_members`` (``project_id``,
``user_id``, unique together): short enough for Oracle's 30-character names
(compiled offline in tests/oracle/test_projects_sql.py). Superusers see every
project without membership. Staff users who exist when this migration runs
saw every project until now; they become members of every existing project,
so nobody loses access on upgrade (narrow it in the admin or with
``manage.py add_project_member --remove``). Projects created later have no
members until a superuser adds them.
"""

from django.conf import settings
from django.db import migrations, models


def keep_existing_access(apps, schema_editor):
    """Every active staff user who is not a superuser becomes a member of every existing project."""
    app_label, model_name = settings.AUTH_USER_MODEL.split(".")
    users = apps.get_model(app_label, model_name)
    project = apps.get_model("memory", "Project")
    staff = list(users.objects.filter(is_staff=True, is_active=True, is_superuser=False).values_list("pk", flat=True))
    if not staff:
        return
    through = project.members.through
    through.objects.bulk_create([through(project_id=p, user_id=u)
                                 for p in project.objects.values_list("pk", flat=True) for u in staff])


class Migration(migrations.Migration):

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("memory", "0007_erasure"),
    ]

    operations = [
        migrations.AddField(
            model_name="project",
            name="members",
            field=models.ManyToManyField(blank=True, help_text="Staff users (not superusers) who may see this project.",
                                         related_name="oam_projects", to=settings.AUTH_USER_MODEL),
        ),
        migrations.RunPython(keep_existing_access, migrations.RunPython.noop),
    ]
