"""How an app adds to another's admin without the other knowing it: actions on its models, what it holds about
one of their rows (shown on the row's page) and links beside it, groups of tiles on the admin home page, and the
frame of the admin's own pages (`admin_page`)."""

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlencode

from django.template.response import TemplateResponse
from django.urls import reverse

# "app_label.ModelName" -> admin actions other apps add to that model's admin.
ADMIN_ACTIONS: dict[str, list[Callable]] = {}
# "app_label.ModelName" -> holdings(obj) -> [Holding]: what other apps keep about one row of that model.
ADMIN_HOLDINGS: dict[str, list[Callable]] = {}
# "app_label.ModelName" -> tool(request, obj) -> (label, url) or None: links beside the row's history button.
ADMIN_OBJECT_TOOLS: dict[str, list[Callable]] = {}
# (order, card): a card(user=, organization=) returns (group title, tiles) or None when the user may not see it.
DASHBOARD_CARDS: list[tuple[int, Callable]] = []


@dataclass
class Tile:
    label: str
    count: int | str  # a number, or a short text such as an age
    url: str
    attention: bool = False


@dataclass
class Holding:
    """Rows an app keeps about an object: how many, links to the first few, and a link to them all."""

    title: str
    count: int
    links: list[tuple[str, str]]  # (label, admin URL)
    all_url: str = ""


HOLDING_LINKS = 10


def holding(title: str, queryset, *, label: Callable = str, filters: dict | None = None) -> Holding:
    """The Holding of a queryset (ordered, as its links are its first rows); `filters` select the same rows on
    the model's change list."""
    opts = queryset.model._meta
    links = [
        (label(row), reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[row.pk]))
        for row in queryset[:HOLDING_LINKS]
    ]
    all_url = admin_url(f"admin:{opts.app_label}_{opts.model_name}_changelist", **filters) if filters else ""
    return Holding(title=title, count=queryset.count(), links=links, all_url=all_url)


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


def register_admin_holdings(model: str, holdings: Callable) -> None:
    """`holdings(obj)` returns the Holdings of the registering app about `obj`, already of its organisation."""
    registered = ADMIN_HOLDINGS.setdefault(model, [])
    if holdings not in registered:
        registered.append(holdings)


def register_object_tool(model: str, tool: Callable) -> None:
    """`tool(request, obj)` returns (label, url) of a link on the object's page, or None when the user may not."""
    registered = ADMIN_OBJECT_TOOLS.setdefault(model, [])
    if tool not in registered:
        registered.append(tool)


def holdings_of(obj) -> list[Holding]:
    return [holding for holdings in ADMIN_HOLDINGS.get(obj._meta.label, ()) for holding in holdings(obj)]


def object_tools_of(request, obj) -> list[tuple[str, str]]:
    return [link for tool in ADMIN_OBJECT_TOOLS.get(obj._meta.label, ()) if (link := tool(request, obj))]


def register_dashboard_card(card: Callable, *, order: int) -> None:
    """Cards show in `order`, lowest first."""
    if all(existing is not card for _, existing in DASHBOARD_CARDS):
        DASHBOARD_CARDS.append((order, card))
        DASHBOARD_CARDS.sort(key=lambda item: item[0])


def of_organization(queryset, organization):
    """A card's rows: the staff member's organisation's, or every organisation's (None, a superuser)."""
    return queryset if organization is None else queryset.filter(organization=organization)
