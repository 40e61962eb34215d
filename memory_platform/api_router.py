"""Every /api/v1/ route, in one place."""

from django.urls import path

from apps.tenancy.views import CurrentClientView

urlpatterns = [
    path("me", CurrentClientView.as_view(), name="current-client"),
]
