"""The base API view seals the tenant: views read through scoped_queryset, never around it."""

import pytest

from apps.core.api import ClientAPIView


@pytest.mark.parametrize("name", ["get_queryset", "get_object"])
def test_a_view_overriding_a_sealed_read_is_refused_when_its_class_is_created(name):
    with pytest.raises(TypeError, match=f"overrides {name}"):
        type("LeakyView", (ClientAPIView,), {name: lambda self, **lookup: None})


def test_an_override_brought_in_by_a_mixin_is_refused_too():
    class Unscoped:
        def get_queryset(self):
            return None

    with pytest.raises(TypeError, match="overrides get_queryset"):
        type("LeakyView", (Unscoped, ClientAPIView), {})


def test_a_view_implementing_the_hook_is_accepted():
    view_class = type("ScopedView", (ClientAPIView,), {"scoped_queryset": lambda self, *, client: client})
    assert view_class.get_queryset is ClientAPIView.get_queryset
