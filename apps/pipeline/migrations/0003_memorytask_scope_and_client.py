# Tasks carry the scope they work in and the client that caused them, so the API shows a task only
# to those allowed to see it. Existing rows take the scope of the session or evolution they name.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('pipeline', '0002_process_heartbeat'),
        ('tenancy', '0001_initial'),
        ('conversations', '0006_session_id_unique_per_user_and_scope'),
    ]

    operations = [
        migrations.AddField(
            model_name='memorytask',
            name='client',
            field=models.ForeignKey(blank=True, help_text='The API client whose request created this task; empty for background follow-ups.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='tenancy.client'),
        ),
        migrations.AddField(
            model_name='memorytask',
            name='scope',
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.RunSQL(
            """
            UPDATE pipeline_memorytask t SET scope = s.scope
            FROM conversations_session s
            WHERE t.payload ? 'session' AND s.id::text = t.payload->>'session';
            UPDATE pipeline_memorytask SET scope = payload->>'scope'
            WHERE task_type = 'evolve_skills' AND payload ? 'scope';
            """,
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
