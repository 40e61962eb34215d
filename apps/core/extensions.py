"""How an app adds to another's admin without the other knowing it: actions on its models, groups of tiles
on the admin home page, and the frame of the admin's own pages (`admin_page`)."""

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlencode

from django.template.response import TemplateResponse
from django.urls import reverse

# "app_label.ModelName" -> admin actions other apps add to that model's admin.
ADMIN_ACTIONS: dict[str, list[Callable]] = {}
# (order, card): a card(user=, organization=) returns (group title, tiles) or None when the user may not see it.
DASHBOARD_CARDS: list[tuple[int, Callable]] = []


@dataclass
class Tile:
    label: str
    count: int | str  # a number, or a short text such as an age
    url: str
    attention: bool = False


def admin_url(name: str, **params) -> str:
    url = reverse(name)
    return f"{url}?{urlencode(params)}" if params else url


def admin_page(model_admin, request, template: str, *, title: str, **context) -> TemplateResponse:
    frame = {**model_admin.admin_site.each_context(request), "opts": model_admin.model._meta, "title": title}
    return TemplateResponse(request, template, {**frame, **context})


def register_admin_action(model: str, action: Callable) -> None:
    actions = ADMIN_ACTIONS.setdefault(model, [])
    if action not in actions:
        actions.append(action)


def register_dashboard_card(card: Callable, *, order: int) -> None:
    """Cards show in `order`, lowest first."""
    if all(existing is not card for _, existing in DASHBOARD_CARDS):
        DASHBOARD_CARDS.append((order, card))
        DASHBOARD_CARDS.sort(key=lambda item: item[0])


def of_organization(queryset, organization):
    """A card's rows: the staff member's organisation's, or every organisation's (None, a superuser)."""
    return queryset if organization is None else queryset.filter(organization=organization)
