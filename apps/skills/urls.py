"""Skill routes, included under /api/v1/ by memory_platform/api_router.py."""

urlpatterns = []
