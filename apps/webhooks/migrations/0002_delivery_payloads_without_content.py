"""Deliveries no longer keep what an event is about (it is rendered from the current rows at send time):
the copies stored before are removed from the delivery log."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("webhooks", "0001_initial")]

    operations = [
        migrations.RunSQL(
            sql="""
                UPDATE webhooks_webhookdelivery SET payload = payload #- '{data,content}'
                WHERE payload -> 'data' ? 'content'
            """,
            reverse_sql=migrations.RunSQL.noop,
        )
    ]
