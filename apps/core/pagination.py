"""Pagination of every list endpoint: `limit`/`offset`, with DRF's page-number spellings
(`page_size`, `page` counted from 1) accepted as aliases, so either convention works."""

from dataclasses import dataclass
from functools import reduce

from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.utils.urls import remove_query_param

from apps.core import fields
from apps.core.api import InputSerializer
from apps.core.operations import validated
from apps.core.replicas import read_on_replica

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
MAX_OFFSET = 2**31 - 1
# DRF's page-number spellings, accepted beside limit/offset (the OpenAPI schema documents those two).
PAGE_ALIASES = ("page", "page_size")


class PageQuerySerializer(InputSerializer):
    """The paging part of a list endpoint's query; list filters inherit it."""

    from_query = True

    limit = fields.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_LIMIT,
        help_text=f"Items per page (default {DEFAULT_LIMIT}); `page_size` is an alias.",
    )
    offset = fields.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_OFFSET,
        help_text="Items to skip; `page` (from 1) is an alias: offset = (page - 1) × limit.",
    )
    page_size = fields.IntegerField(required=False, min_value=1, max_value=MAX_LIMIT, help_text="Alias of `limit`.")
    page = fields.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_OFFSET,
        help_text="Page number from 1: `offset` = (page - 1) × limit.",
    )

    def validate(self, attrs):
        attrs = super().validate(attrs)
        if "page_size" in attrs and "limit" in attrs and attrs["page_size"] != attrs["limit"]:
            raise serializers.ValidationError({"page_size": ["Give `limit` or `page_size`, not two different values."]})
        if "page" in attrs and "offset" in attrs:
            raise serializers.ValidationError({"page": ["Give `offset` or `page`, not both."]})
        return attrs


@dataclass
class Page:
    """One page of a list operation: every match counted, `results` rendered."""

    count: int
    limit: int
    offset: int
    results: list


def paginate(queryset, *, filters: dict, serializer_class) -> Page:
    limit = filters.get("limit") or filters.get("page_size") or DEFAULT_LIMIT
    offset = (filters["page"] - 1) * limit if "page" in filters else filters.get("offset", 0)
    count = queryset.count()
    rows = [] if count == 0 or offset > count else queryset[offset : offset + limit]
    return Page(count=count, limit=limit, offset=offset, results=serializer_class(rows, many=True).data)


def paginated_read(client, query, *, filters, select, output) -> Page:
    """A list operation's body: the page of `select(reader=, filters=)` the query asks for, on a replica if any."""
    values = validated(filters, query)
    return read_on_replica(
        client, lambda reader: paginate(select(reader=reader, filters=values), filters=values, serializer_class=output)
    )


class Pagination(LimitOffsetPagination):
    """The page's links and the OpenAPI shape of a list; `paginate` cuts the page itself."""

    default_limit = DEFAULT_LIMIT
    max_limit = MAX_LIMIT

    def _canonical(self, url):
        """Links carry `limit` and `offset` only, whichever spelling the request used."""
        return None if url is None else reduce(remove_query_param, PAGE_ALIASES, url)

    def get_next_link(self):
        return self._canonical(super().get_next_link())

    def get_previous_link(self):
        return self._canonical(super().get_previous_link())


def paged_response(request, page):
    paginator = Pagination()
    paginator.request, paginator.limit, paginator.offset, paginator.count = request, page.limit, page.offset, page.count
    return paginator.get_paginated_response(page.results)
