"""memory_platform/api_router.py: no routed view extends another (issue 42: one path was split across
two apps by subclassing), and a view written in an app serves that app's operations."""

from apps.core import adapters
from memory_platform.api_router import urlpatterns


def routed_views() -> dict:
    return {pattern.pattern._route: pattern.callback.view_class for pattern in urlpatterns}


def test_no_routed_view_extends_a_view_of_another_module():
    for route, view in routed_views().items():
        foreign = [
            ancestor.__qualname__
            for ancestor in view.__mro__[1:]
            if ancestor.__module__.startswith("apps.")
            and ancestor.__module__.endswith(".views")
            and ancestor.__module__ != view.__module__
        ]
        assert not foreign, f"{route}: {view.__module__}.{view.__qualname__} extends {foreign}"


def test_a_view_written_in_an_app_serves_that_apps_operations():
    checked = 0
    for route, view in routed_views().items():
        if view.__module__ == adapters.__name__:  # made by list_view/delete_view for the operation it is given
            continue
        app = view.__module__.removesuffix(".views")
        for method in view.http_method_names:
            operation = getattr(getattr(view, method, None), "operation", None)
            if operation is not None:
                assert operation.__module__ == f"{app}.operations", (route, method, operation.__module__)
                checked += 1
    assert checked > 20
