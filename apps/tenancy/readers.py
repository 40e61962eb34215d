"""Who is reading: an organisation and the scopes it may read. The search engine and every
selector of scoped rows take one, so a read is scoped by the value it is given, never by a
caller remembering to filter (an API client's is `client.reader`; a background job builds the
reader of exactly the scope it works in)."""

import uuid
from dataclasses import dataclass

from django.db.models import Q


@dataclass(frozen=True)
class Reader:
    organization_id: uuid.UUID
    read_scopes: tuple[str, ...]

    def condition(self) -> Q:
        """The rows this reader may see, over a model with `organization` and `scope`: the tenancy part
        of every visibility rule (the apps add theirs to it; the search engine compiles them to SQL)."""
        return Q(organization_id=self.organization_id, scope__in=self.read_scopes)

    def rows(self, model):
        """The model's rows this reader may see (the model has `organization` and `scope`)."""
        return model.objects.filter(self.condition())

    def organization(self):
        """The organisation row (None once deleted), for what records per organisation, such as LLM usage."""
        from apps.tenancy.models import Organization

        return Organization.objects.filter(pk=self.organization_id).first()
