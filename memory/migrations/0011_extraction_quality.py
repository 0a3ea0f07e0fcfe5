"""What the staff quality dashboard (``memory.quality``) reads from extraction jobs: how many messages a job
read, how many candidates it skipped as duplicates, and how many it rejected for each reason
(``memory.extraction.candidates.REJECT_REASONS``). Nullable: jobs that finished before are "not recorded".

An index on (project, finished_at) serves the dashboard's time-bucketed reads of a project's jobs.
Oracle DDL compiled offline in tests/oracle/test_quality_sql.py.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0010_memory_versions'),
    ]

    operations = [
        migrations.AddField(
            model_name='extractionjob',
            name='messages_extracted',
            field=models.IntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='extractionjob',
            name='duplicates_skipped',
            field=models.IntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='extractionjob',
            name='rejected_not_text',
            field=models.IntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='extractionjob',
            name='rejected_unknown_type',
            field=models.IntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='extractionjob',
            name='rejected_no_source',
            field=models.IntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='extractionjob',
            name='rejected_repeated',
            field=models.IntegerField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name='extractionjob',
            index=models.Index(fields=['project', 'finished_at'], name='oam_job_finished_ix'),
        ),
    ]
