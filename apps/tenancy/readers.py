"""Who is reading: an organisation, the scopes it may read and the database copy it reads from; every
selector and the search engine take one, so a read is scoped by the value it is given."""

import dataclasses
import uuid
from dataclasses import dataclass

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Q


@dataclass(frozen=True)
class Reader:
    organization_id: uuid.UUID
    read_scopes: tuple[str, ...]
    database: str = DEFAULT_DB_ALIAS

    def on(self, database: str) -> "Reader":
        return dataclasses.replace(self, database=database)

    def objects(self, model):
        return model.objects.using(self.database)

    def condition(self) -> Q:
        """The tenancy part of every visibility rule, over a model with `organization` and `scope`."""
        return Q(organization_id=self.organization_id, scope__in=self.read_scopes)

    def rows(self, model):
        return self.objects(model).filter(self.condition())

    def organization(self):
        """None once deleted."""
        from apps.tenancy.models import Organization

        return Organization.objects.filter(pk=self.organization_id).first()
