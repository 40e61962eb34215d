"""REST adapters of apps.webhooks.operations."""

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response

from apps.core.adapters import delete_view, list_view, read_view
from apps.core.api import ClientAPIView, serves
from apps.core.pagination import Pagination, paged_response
from apps.webhooks import operations, serializers

EXAMPLE_ID = "5d6e7f80-9a1b-4c2d-8e3f-4a5b6c7d8e9f"


class WebhookListView(
    list_view(
        operations.list_webhooks,
        filters=serializers.WebhookListFilterSerializer,
        output=serializers.WebhookOutputSerializer,
        example="GET /api/v1/webhooks/",
    )
):
    error_statuses = {"POST": (409,)}  # the organisation has WEBHOOK_MAX_ENDPOINTS_PER_ORGANIZATION endpoints

    @extend_schema(
        request=serializers.WebhookCreateInputSerializer, responses={201: serializers.WebhookCreatedOutputSerializer}
    )
    @serves(
        operations.create_webhook,
        example="POST /api/v1/webhooks/",
        body={"url": "https://hooks.example.com/memory", "events": ["skill.review_needed", "erasure.finished"]},
    )
    def post(self, request):
        body = operations.create_webhook(client=self.client, data=request.data)
        return Response(body, status=status.HTTP_201_CREATED)


class WebhookDetailView(
    read_view(
        operations.get_webhook,
        output=serializers.WebhookOutputSerializer,
        example=f"GET /api/v1/webhooks/{EXAMPLE_ID}/",
    ),
    delete_view(operations.delete_webhook, example=f"DELETE /api/v1/webhooks/{EXAMPLE_ID}/"),
):
    @extend_schema(request=serializers.WebhookPatchInputSerializer, responses=serializers.WebhookOutputSerializer)
    @serves(operations.update_webhook, example=f"PATCH /api/v1/webhooks/{EXAMPLE_ID}/", body={"active": True})
    def patch(self, request, webhook_id):
        return Response(operations.update_webhook(client=self.client, webhook_id=webhook_id, data=request.data))


class WebhookDeliveryListView(ClientAPIView):
    pagination_class = Pagination

    @extend_schema(
        parameters=[serializers.DeliveryListFilterSerializer], responses=serializers.DeliveryOutputSerializer(many=True)
    )
    @serves(operations.list_webhook_deliveries, example=f"GET /api/v1/webhooks/{EXAMPLE_ID}/deliveries")
    def get(self, request, webhook_id):
        page = operations.list_webhook_deliveries(client=self.client, webhook_id=webhook_id, query=request.query_params)
        return paged_response(request, page)


class WebhookTestView(ClientAPIView):
    error_statuses = (429,)  # over WEBHOOK_TEST_SENDS_PER_MINUTE

    @extend_schema(request=None, responses={202: serializers.DeliveryOutputSerializer})
    @serves(operations.test_webhook, example=f"POST /api/v1/webhooks/{EXAMPLE_ID}/test")
    def post(self, request, webhook_id):
        body = operations.test_webhook(client=self.client, webhook_id=webhook_id)
        return Response(body, status=status.HTTP_202_ACCEPTED)
