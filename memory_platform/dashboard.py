"""The admin home page: the cards the apps registered (core.extensions), each a group of counts
of what needs a person with links to the filtered lists, for what the signed-in person may view."""

from apps.core.extensions import DASHBOARD_CARDS, Tile


def dashboard_tiles(*, user, organization) -> list[tuple[str, list[Tile]]]:
    """Groups of tiles for what `user` may view; `organization` None means every organisation."""
    groups = []
    for _, card in DASHBOARD_CARDS:
        group = card(user=user, organization=organization)
        if group is not None:
            groups.append(group)
    return groups
