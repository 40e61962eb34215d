"""Reads of sessions and messages, always within the caller's organisation and read scopes."""

from apps.conversations.models import Message, Session


def session_list(*, client, filters: dict | None = None):
    filters = filters or {}
    queryset = Session.objects.filter(
        organization_id=client.organization_id, scope__in=client.read_scopes
    ).select_related("end_user")
    if filters.get("user_id"):
        queryset = queryset.filter(end_user__user_id=filters["user_id"])
    if filters.get("session_tag"):
        queryset = queryset.filter(session_tag=filters["session_tag"])
    if filters.get("status"):
        queryset = queryset.filter(status=filters["status"])
    if filters.get("start"):
        queryset = queryset.filter(last_message_at__gte=filters["start"])
    if filters.get("end"):
        queryset = queryset.filter(last_message_at__lte=filters["end"])
    return queryset.order_by("-last_message_at", "-created_at")


def session_messages(*, session: Session):
    return Message.objects.filter(session=session).defer("embedding", "search_vector").order_by("seq")


def message_list(*, client):
    return Message.objects.filter(organization_id=client.organization_id, scope__in=client.read_scopes)
