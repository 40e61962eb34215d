"""Admin actions that run a service on each selected object."""

from django.contrib import admin, messages

from apps.core.errors import ConflictError
from apps.skills.services.review import person_actor


class ServiceActions:
    """`service(<item_argument>=object, actor=the person, ...)`; a refusal is a warning, not an error."""

    item_argument = ""
    item_label = ""

    def _each(self, request, queryset, service, verb: str, **kwargs) -> None:
        done = 0
        for item in queryset:
            try:
                service(**{self.item_argument: item}, actor=person_actor(request.user), **kwargs)
                done += 1
            except ConflictError as exc:
                self.message_user(request, str(exc), messages.WARNING)
        if done:
            self.message_user(request, f"{verb} {done} {self.item_label}(s).", messages.SUCCESS)


def service_action(service, verb: str, description: str):

    @admin.action(description=description, permissions=["change"])
    def action(self, request, queryset):
        self._each(request, queryset, service, verb)

    return action
