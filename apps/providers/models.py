"""Token usage of every LLM call, per organisation and per pipeline task, for cost accounting."""

from django.db import models

from apps.core.models import BaseModel


class LLMUsage(BaseModel):
    organization = models.ForeignKey(
        "tenancy.Organization", on_delete=models.CASCADE, null=True, blank=True, related_name="llm_usage"
    )
    # The MemoryTask id, not a foreign key: usage outlives pruned task rows.
    task_id = models.UUIDField(null=True, blank=True, db_index=True)
    purpose = models.CharField(max_length=64, blank=True, default="")
    model = models.CharField(max_length=128)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "LLM usage"
        verbose_name_plural = "LLM usage"
        indexes = [models.Index(fields=["organization", "-created_at"], name="llm_usage_org_recent_idx")]

    def __str__(self):
        return f"{self.model}: {self.prompt_tokens}+{self.completion_tokens} tokens"
