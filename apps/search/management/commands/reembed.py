from django.core.management.base import BaseCommand, CommandError

from apps.core.progress import show_progress, wrote_json
from apps.providers.embeddings import embedding_model_name
from apps.search.registry import SOURCES
from apps.search.services import source_stage, stage_swap


class Command(BaseCommand):
    help = (
        "Move stored items to the configured embedding model (EMBEDDING_PROVIDER/MODEL): stage the new vectors "
        "(resumable) while searches keep ranking the old ones, then switch every item in one transaction."
    )

    def add_arguments(self, parser):
        parser.add_argument("--type", action="append", dest="types", help="Memory type(s); default: every type.")
        parser.add_argument("--batch-size", type=int, default=256)
        parser.add_argument(
            "--stage-only", action="store_true", help="compute and keep the new vectors; switch nothing yet"
        )
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, types, batch_size, stage_only, **options):
        types = types or [name for name, source in SOURCES.items() if source.embedding_text]
        unknown = sorted(set(types) - set(SOURCES))
        if unknown:
            raise CommandError(f"Unknown memory type(s) {', '.join(unknown)}; use any of {', '.join(sorted(SOURCES))}.")
        sources = [SOURCES[memory_type] for memory_type in types]
        for source in sources:
            if source.embedding_text is None:
                raise CommandError(f"{source.memory_type} items have no embedding text.")
        model = embedding_model_name()
        embedded = {}
        for source in sources:
            embedded[source.memory_type] = 0
            for done, total, count in source_stage(source=source, batch_size=batch_size):
                embedded[source.memory_type] = count
                if not options["json"]:
                    show_progress(source.memory_type, done, total)
        switched = {} if stage_only else stage_swap(sources=sources)
        remaining = {
            source.memory_type: source.model.objects.exclude(embedding_model=model).count() for source in sources
        }
        data = {
            "model": model,
            "embedded": embedded,
            "reembedded": switched,
            "remaining": remaining,
            "stage_only": stage_only,
        }
        if wrote_json(self, options, data):
            return
        if stage_only:
            self.stdout.write(
                self.style.SUCCESS(
                    f"Staged {model} vectors (embedded now: {embedded}); searches still use the current ones. "
                    "Run `reembed` again to switch."
                )
            )
            return
        self.stdout.write(self.style.SUCCESS(f"Switched to {model}: {switched}."))
        if any(remaining.values()):
            self.stdout.write(f"Items written meanwhile by another model: {remaining}; run `reembed` again.")
