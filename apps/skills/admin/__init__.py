"""Curation of skill memory in the admin, one module a concern. Importing the package (Django's admin
autodiscovery does) registers the model admins, the dashboard cards and the sessions' action."""

from apps.skills.admin import dashboard, experiences, skills  # noqa: F401  (registration on import)
