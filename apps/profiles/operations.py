"""The profile and entity endpoints' operations (REST: apps.profiles.views)."""

from apps.core.operations import Access, check_ids, get_or_404, object_body, operation, require_write_access, validated
from apps.core.pagination import Page, paginate, paginated_read
from apps.profiles import serializers
from apps.profiles.models import LintFinding
from apps.profiles.selectors import entity_list, profile_detail_queryset, profile_list, write_scope_users
from apps.profiles.services.entities import entity_delete, profile_delete, topics_compile_request
from apps.profiles.services.lint import profiles_lint


@operation()
def list_profiles(*, client, query) -> Page:
    """List compiled pages in the caller's read scopes: people's (the default) or topics' (`kind=topic`)."""
    return paginated_read(
        client,
        query,
        filters=serializers.ProfileListFilterSerializer,
        select=profile_list,
        output=serializers.ProfileOutputSerializer,
    )


def _profile(client, profile_id: str):
    check_ids(profile_id=profile_id)
    return get_or_404(profile_detail_queryset(reader=client.reader), pk=profile_id)


@operation()
def get_profile(*, client, profile_id: str) -> dict:
    """Read a profile with its revisions and the sources each cites."""
    return serializers.ProfileDetailOutputSerializer(_profile(client, profile_id)).data


@operation(access=Access.WRITE)
def delete_profile(*, client, profile_id: str) -> None:
    """Delete a compiled profile page with its revisions and sources.

    Its entity stays: new mentions compile a new page."""
    profile = _profile(client, profile_id)
    require_write_access(client, profile)
    profile_delete(profile=profile)


@operation()
def get_profile_findings(*, client, profile_id: str) -> dict:
    """What lint found about a profile page (stale, orphan, contradiction)."""
    profile = _profile(client, profile_id)
    findings = LintFinding.objects.filter(profile=profile).order_by("status", "-created_at", "id")
    rendered = serializers.LintFindingOutputSerializer(findings, many=True).data
    return serializers.ProfileFindingsOutputSerializer({"profile_id": profile.pk, "findings": rendered}).data


@operation()
def list_entities(*, client, query) -> Page:
    """List one user's entities and their co-occurrence edges."""
    filters = validated(serializers.EntityListFilterSerializer, query)
    entities = entity_list(reader=client.reader, filters=filters)
    return paginate(entities, filters=filters, serializer_class=serializers.EntityOutputSerializer)


@operation(access=Access.WRITE)
def delete_entity(*, client, entity_id: str) -> None:
    """Delete an entity with its mentions, edges and page."""
    check_ids(entity_id=entity_id)
    entity = get_or_404(entity_list(reader=client.reader), pk=entity_id)
    require_write_access(client, entity)
    entity_delete(entity=entity)


@operation(access=Access.WRITE)
def compile_topics(*, client, data) -> dict:
    """Compile the topic pages of the caller's write scope now: one user's, or every user's.

    Runs in the background (202 with the task's id). GET tasks/<id>/ shows its result when done:
    the scopes compiled, users, items, topics, pages created, updated, unchanged and archived,
    items left as noise, tokens and seconds. Asking again while one waits returns that one."""
    data = validated(serializers.TopicCompileInputSerializer, object_body(data))
    end_user = None
    if data.get("user_id"):
        end_user = get_or_404(write_scope_users(client=client), user_id=data["user_id"])
    task = topics_compile_request(
        organization=client.organization, scope=client.write_scope, end_user=end_user, client=client
    )
    user_id = end_user.user_id if end_user else None
    body = {"scope": client.write_scope, "user_id": user_id, "task_id": task.pk, "task_status": task.status}
    return serializers.TopicCompileOutputSerializer(body).data


@operation(access=Access.WRITE)
def lint_profile(*, client, profile_id: str) -> dict:
    """Lint one compiled page now and list its open issues.

    Stale (some items it quotes are gone: a recompile is queued), orphan (all are gone: the page is
    archived) and, with an LLM and PROFILE_LINT_CONTRADICTIONS on, contradictions with the owner's
    other pages. Returns what this pass found and every open finding of the page."""
    profile = _profile(client, profile_id)
    require_write_access(client, profile)
    return serializers.LintOutputSerializer(profiles_lint(profile=profile)).data
