"""Who is reading: an organisation and the scopes it may read. The search engine and every
selector of scoped rows take one, so a read is scoped by the value it is given, never by a
caller remembering to filter (an API client's is `client.reader`; a background job builds the
reader of exactly the scope it works in).

A reader also names the database it reads from: the primary (`default`), or a read replica that a
read operation chose for its caller (`client.reader.on(read_alias(client))`, apps.core.replicas).
Its selectors and the search engine read there, so one choice covers a whole operation."""

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
        """The same reader, reading from another copy of the database (a replica alias)."""
        return dataclasses.replace(self, database=database)

    def objects(self, model):
        """The model's manager on this reader's database, for a selector that filters by its own rule."""
        return model.objects.using(self.database)

    def condition(self) -> Q:
        """The rows this reader may see, over a model with `organization` and `scope`: the tenancy part
        of every visibility rule (the apps add theirs to it; the search engine compiles them to SQL)."""
        return Q(organization_id=self.organization_id, scope__in=self.read_scopes)

    def rows(self, model):
        """The model's rows this reader may see (the model has `organization` and `scope`)."""
        return self.objects(model).filter(self.condition())

    def organization(self):
        """The organisation row (None once deleted), for what records per organisation, such as LLM usage."""
        from apps.tenancy.models import Organization

        return Organization.objects.filter(pk=self.organization_id).first()
