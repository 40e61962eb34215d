# A turn learned from by extraction is not "distilled": one name for the mark both learners leave.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0006_session_id_unique_per_user_and_scope'),
    ]

    operations = [
        migrations.RenameField(
            model_name='message',
            old_name='distilled_at',
            new_name='learned_at',
        ),
        migrations.AlterField(
            model_name='message',
            name='learned_at',
            field=models.DateTimeField(blank=True, help_text='When this turn was learned from (distilled or extracted).', null=True),
        ),
    ]
