"""factory_boy factories for the platform's models."""

import factory

from apps.tenancy.models import Client, EndUser, Organization
from apps.tenancy.services import api_key_create


class OrganizationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Organization

    name = factory.Sequence(lambda n: f"org-{n}")


class ClientFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Client
        skip_postgeneration_save = True

    organization = factory.SubFactory(OrganizationFactory)
    name = factory.Sequence(lambda n: f"client-{n}")
    write_scope = "default"
    read_scopes = factory.LazyAttribute(lambda client: [client.write_scope] if client.write_scope else [])

    @factory.post_generation
    def raw_key(client, create, extracted, **kwargs):
        """`client.raw_key` holds a working API key for tests."""
        _, client.raw_key = api_key_create(client=client)


class EndUserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = EndUser

    organization = factory.SubFactory(OrganizationFactory)
    user_id = factory.Sequence(lambda n: f"user-{n}")
