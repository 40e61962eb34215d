"""Every error under /api/ is JSON in one shape."""

import pytest

pytestmark = pytest.mark.django_db


def assert_error_shape(response, status):
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error["status"] == status
    assert error["code"] and error["message"]
    return error


def test_unknown_api_url_is_a_json_404(api):
    assert_error_shape(api.get("/api/v1/does-not-exist"), 404)


def test_method_not_allowed_is_json(api):
    error = assert_error_shape(api.delete("/api/v1/me"), 405)
    assert "DELETE" in error["message"]
