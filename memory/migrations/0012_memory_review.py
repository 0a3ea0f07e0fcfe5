"""The review queue (``memory.review``): ``oam_memories.pending`` and an index for the queue's listing.

A memory awaiting review is stored and indexed with its chunks' status ``pending`` (no search returns
them); approving it copies its status to its chunks. Oracle DDL compiled offline in
tests/oracle/test_review_sql.py.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0011_extraction_quality'),
    ]

    operations = [
        migrations.AddField(
            model_name='memory',
            name='pending',
            field=models.BooleanField(default=False),
        ),
        migrations.AddIndex(
            model_name='memory',
            index=models.Index(fields=['project', 'pending', 'created_at'], name='oam_mem_review_ix'),
        ),
    ]
