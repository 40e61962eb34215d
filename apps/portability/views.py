"""REST adapters of apps.portability.operations."""

from django.http import FileResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response

from apps.core.api import ClientAPIView, serves
from apps.portability import operations
from apps.portability.serializers import ExportAcceptedOutputSerializer, ExportInputSerializer, ExportOutputSerializer


class ExportCreateView(ClientAPIView):
    error_statuses = (404,)  # the user or client named in the body

    @extend_schema(request=ExportInputSerializer, responses={202: ExportAcceptedOutputSerializer})
    @serves(operations.create_export, example="POST /api/v1/exports", body={"user_id": "alice"})
    def post(self, request):
        return Response(
            operations.create_export(client=self.client, data=request.data), status=status.HTTP_202_ACCEPTED
        )


class ExportDetailView(ClientAPIView):
    @extend_schema(responses={200: ExportOutputSerializer})
    @serves(operations.get_export, example="GET /api/v1/exports/3e4f5a6b-7c8d-4e9f-8a0b-1c2d3e4f5a6b")
    def get(self, request, export_id):
        def download_url(export):
            return request.build_absolute_uri(reverse("export-download", args=[export.pk]))

        return Response(operations.get_export(client=self.client, export_id=export_id, download_url=download_url))


class ExportDownloadView(ClientAPIView):
    error_statuses = (409,)  # not ready yet

    @extend_schema(responses={(200, "application/zip"): OpenApiTypes.BINARY})
    @serves(operations.open_export_archive, example="GET /api/v1/exports/3e4f5a6b-7c8d-4e9f-8a0b-1c2d3e4f5a6b/download")
    def get(self, request, export_id):
        export, archive = operations.open_export_archive(client=self.client, export_id=export_id)
        return FileResponse(
            archive, as_attachment=True, filename=f"export-{export.pk}.zip", content_type="application/zip"
        )
