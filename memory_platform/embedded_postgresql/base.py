"""Django's PostgreSQL backend on the embedded server: the server is started (or attached to) when a
process first connects or opens `dbshell`, not when the settings are imported."""

from django.db.backends.postgresql import base, client

from memory_platform.embedded_db import ensure_server


class DatabaseClient(client.DatabaseClient):
    def runshell(self, parameters):
        ensure_server(self.connection.settings_dict)
        super().runshell(parameters)


class DatabaseWrapper(base.DatabaseWrapper):
    client_class = DatabaseClient

    def get_connection_params(self):
        ensure_server(self.settings_dict)
        return super().get_connection_params()
