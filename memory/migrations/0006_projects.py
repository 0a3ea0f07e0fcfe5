"""Projects: a ``project`` column on every table, record ids unique within a project.

Everything stored before goes to the ``default`` project, created here as the
first row of ``oam_projects`` (pk 1 on SQLite and Oracle: the table is new),
which is why the new ``project`` columns are added with the default 1. Record
ids become stored ids, ``"1:<id>"`` (``memory.tenancy.stored_id``), in every
column that holds one: primary keys, foreign keys and the id columns of
memories, relations and search chunks; ``pair_key`` is recomputed from them.
JSON lists of ids (``Message.parts``, ``Memory.source_message_ids``) keep
public ids and are not touched. The id columns grow to 300 characters first,
so the prefix fits on Oracle.

On SQLite most of these operations rebuild their table, which drops the FTS5
triggers of the keyword index (``memory.operations.CreateKeywordIndex``):
``RestoreKeywordTriggers`` puts them back at the end (and, for the reverse
migration, at the start). The FTS5 index keeps its content: rebuilt tables
keep their row ids.

Reversible while the default project is the only one with records.
"""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models
from django.db.models import F, Value
from django.db.models.functions import Concat, Length, Substr

import memory.operations

DEFAULT_PROJECT_PK = 1
PREFIX = f"{DEFAULT_PROJECT_PK}:"
STORED_ID_LENGTH = 300

#: Columns that hold stored ids, per model (nullable ones are skipped when NULL).
ID_COLUMNS = {
    "thread": ["id"],
    "message": ["id", "thread_id"],
    "memory": ["id", "thread_id"],
    "image": ["id", "thread_id", "message_id"],
    "recordlink": ["id", "thread_id", "source_id", "target_id"],
    "threadsummary": ["thread_id"],
    "extractionjob": ["thread_id"],
    "searchchunk": ["record_id", "thread_id"],
}
KEYWORD_INDEX = {"model_name": "searchchunk", "name": "oam_search_chunks_fts", "fields": ["text", "context"]}


def _pair_key(a: str, b: str) -> str:
    """``memory.links.pair_key`` as of this migration."""
    first, second = sorted((a, b))
    return f"{len(first)}:{first}|{second}"


def create_default_project(apps, schema_editor):
    Project = apps.get_model("memory", "Project")
    project = Project.objects.using(schema_editor.connection.alias).create(slug="default", name="Default project")
    if project.pk != DEFAULT_PROJECT_PK:
        raise RuntimeError(f"the default project got pk {project.pk}, expected {DEFAULT_PROJECT_PK}")


def delete_projects(apps, schema_editor):
    apps.get_model("memory", "Project").objects.using(schema_editor.connection.alias).all().delete()


def _rewrite(apps, schema_editor, value_of):
    alias = schema_editor.connection.alias
    for model_name, columns in ID_COLUMNS.items():
        manager = apps.get_model("memory", model_name).objects.using(alias)
        for column in columns:
            manager.filter(**{f"{column}__isnull": False}).update(**{column: value_of(column)})
    RecordLink = apps.get_model("memory", "RecordLink")
    for link in RecordLink.objects.using(alias).only("pk", "source_id", "target_id"):
        RecordLink.objects.using(alias).filter(pk=link.pk).update(pair_key=_pair_key(link.source_id, link.target_id))


def prefix_ids(apps, schema_editor):
    """Every stored id becomes ``"1:<id>"``."""
    _rewrite(apps, schema_editor, lambda column: Concat(Value(PREFIX), F(column)))


def strip_ids(apps, schema_editor):
    """Back to bare ids; refused when another project holds records (their ids would collide)."""
    alias = schema_editor.connection.alias
    for model_name in ID_COLUMNS:
        if apps.get_model("memory", model_name).objects.using(alias).exclude(project_id=DEFAULT_PROJECT_PK).exists():
            raise RuntimeError("cannot unapply 0006_projects: projects other than 'default' hold records")
    _rewrite(apps, schema_editor, lambda column: Substr(F(column), len(PREFIX) + 1, Length(F(column))))


def _project(**kwargs):
    return models.ForeignKey(default=DEFAULT_PROJECT_PK, on_delete=django.db.models.deletion.PROTECT,
                             to="memory.project", **kwargs)


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0005_images"),
    ]

    operations = [
        memory.operations.RestoreKeywordTriggers(**KEYWORD_INDEX),
        migrations.CreateModel(
            name="Project",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("slug", models.SlugField(unique=True)),
                ("name", models.CharField(blank=True, default="", max_length=200)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={"db_table": "oam_projects", "ordering": ["slug"]},
        ),
        migrations.RunPython(create_default_project, delete_projects),
        # Room for the project prefix before any id gets it.
        migrations.AlterField("thread", "id", models.CharField(max_length=STORED_ID_LENGTH, primary_key=True,
                                                                serialize=False)),
        migrations.AlterField("message", "id", models.CharField(max_length=STORED_ID_LENGTH, primary_key=True,
                                                                 serialize=False)),
        migrations.AlterField("memory", "id", models.CharField(max_length=STORED_ID_LENGTH, primary_key=True,
                                                                serialize=False)),
        migrations.AlterField("memory", "thread_id", models.CharField(blank=True, db_index=True,
                                                                       max_length=STORED_ID_LENGTH, null=True)),
        migrations.AlterField("image", "id", models.CharField(max_length=STORED_ID_LENGTH, primary_key=True,
                                                               serialize=False)),
        migrations.AlterField("recordlink", "id", models.CharField(max_length=STORED_ID_LENGTH, primary_key=True,
                                                                    serialize=False)),
        migrations.AlterField("recordlink", "thread_id", models.CharField(db_index=True,
                                                                           max_length=STORED_ID_LENGTH)),
        migrations.AlterField("recordlink", "source_id", models.CharField(db_index=True,
                                                                           max_length=STORED_ID_LENGTH)),
        migrations.AlterField("recordlink", "target_id", models.CharField(db_index=True,
                                                                           max_length=STORED_ID_LENGTH)),
        migrations.AlterField("recordlink", "pair_key", models.CharField(max_length=2 * STORED_ID_LENGTH + 8,
                                                                          unique=True)),
        migrations.AlterField("searchchunk", "record_id", models.CharField(max_length=STORED_ID_LENGTH)),
        migrations.AlterField("searchchunk", "thread_id", models.CharField(blank=True, max_length=STORED_ID_LENGTH,
                                                                            null=True)),
        migrations.AddField("thread", "project", _project(related_name="threads"), preserve_default=False),
        migrations.AddField("message", "project", _project(related_name="+"), preserve_default=False),
        migrations.AddField("memory", "project", _project(related_name="+"), preserve_default=False),
        migrations.AddField("image", "project", _project(related_name="+"), preserve_default=False),
        migrations.AddField("recordlink", "project", _project(related_name="+"), preserve_default=False),
        migrations.AddField("threadsummary", "project", _project(related_name="+"), preserve_default=False),
        migrations.AddField("extractionjob", "project", _project(related_name="+"), preserve_default=False),
        migrations.AddField("searchchunk", "project", _project(related_name="+"), preserve_default=False),
        migrations.RunPython(prefix_ids, strip_ids),
        migrations.RemoveIndex("searchchunk", "oam_chunk_scope_ix"),
        migrations.AddIndex("searchchunk", models.Index(fields=["project", "user_id", "agent_id", "thread_id"],
                                                        name="oam_chunk_scope_ix")),
        memory.operations.RestoreKeywordTriggers(**KEYWORD_INDEX),
    ]
