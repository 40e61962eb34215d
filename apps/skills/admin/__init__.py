"""Curation of skill memory in the admin; importing the package registers the admins and extensions."""

from apps.skills.admin import dashboard, experiences, skills  # noqa: F401  (registration on import)
