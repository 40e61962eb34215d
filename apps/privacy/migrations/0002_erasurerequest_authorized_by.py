# Erasure requests record the permission they were granted under; an erasure's task names its requester.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('privacy', '0001_initial'),
        ('pipeline', '0003_memorytask_scope_and_client'),
    ]

    operations = [
        migrations.AddField(
            model_name='erasurerequest',
            name='authorized_by',
            field=models.CharField(choices=[('client_can_erase', 'API client with can_erase'), ('staff', 'Staff in the admin')], default='client_can_erase', help_text='The permission the request was granted under, as it stood when it was made.', max_length=32),
        ),
        migrations.RunSQL(
            """
            UPDATE privacy_erasurerequest SET authorized_by = 'staff' WHERE requested_by_staff <> '';
            UPDATE pipeline_memorytask t SET client_id = e.requested_by_id
            FROM privacy_erasurerequest e WHERE e.task_id = t.id;
            """,
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
