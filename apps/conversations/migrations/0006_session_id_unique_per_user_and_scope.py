# Session ids become unique per user and scope: another scope's ids are neither visible nor in the way.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0005_message_user_leading_index'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='session',
            name='session_id_unique_per_user',
        ),
        migrations.AddConstraint(
            model_name='session',
            constraint=models.UniqueConstraint(fields=('organization', 'end_user', 'scope', 'session_id'), name='session_id_unique_per_user_and_scope', violation_error_message='This user already has a session with this id in this scope.'),
        ),
    ]
