"""The admin home page: the cards the apps registered (core.extensions), each a group of counts
of what needs a person with links to the filtered lists, for what the signed-in person may view."""

from django.urls import reverse

from apps.core.extensions import DASHBOARD_CARDS, Tile
from memory_platform.supervisor import supervisor_status


def dashboard_tiles(*, user, organization) -> list[tuple[str, list[Tile]]]:
    """Groups of tiles for what `user` may view; `organization` None means every organisation."""
    groups = []
    for _, card in DASHBOARD_CARDS:
        group = card(user=user, organization=organization)
        if group is not None:
            groups.append(group)
    return groups


def processes_card(*, user, organization):
    """Under `make run` (runplatform): each process and how often its supervisor restarted it."""
    if not user.has_perm("pipeline.view_memorytask"):
        return None
    supervised = supervisor_status()
    if supervised is None:
        return None
    return (
        "Processes (make run)",
        [
            Tile(
                f"{name}: restarts",
                child["restarts"],
                reverse("readyz"),
                attention=child["restarts"] > 0 or child["status"] != "running",
            )
            for name, child in supervised.items()
        ],
    )
