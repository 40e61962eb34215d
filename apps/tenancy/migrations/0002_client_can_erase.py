# Clients may erase only with can_erase (off by default).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tenancy', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='client',
            name='can_erase',
            field=models.BooleanField(default=False, help_text="May erase any end user or client of the organisation, in every scope (DELETE users/…/memories, clients/…/memories) and see the organisation's erasures."),
        ),
    ]
