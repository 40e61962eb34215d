import json
import sys

from django.core.management.base import BaseCommand, CommandError

from apps.providers.embeddings import embedding_model_name
from apps.search.registry import SOURCES
from apps.search.services import source_reembed


class Command(BaseCommand):
    help = "Re-embed stored items whose vectors were made by another model (after changing EMBEDDING_PROVIDER/MODEL)."

    def add_arguments(self, parser):
        parser.add_argument("--type", action="append", dest="types", help="Memory type(s); default: every type.")
        parser.add_argument("--batch-size", type=int, default=256)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, types, batch_size, **options):
        types = types or [name for name, source in SOURCES.items() if source.embedding_text]
        unknown = sorted(set(types) - set(SOURCES))
        if unknown:
            raise CommandError(f"Unknown memory type(s) {', '.join(unknown)}; use any of {', '.join(sorted(SOURCES))}.")
        counts = {}
        for memory_type in types:
            source = SOURCES[memory_type]
            if source.embedding_text is None:
                raise CommandError(f"{memory_type} items have no embedding text.")
            done = 0
            for done, total in source_reembed(source=source, batch_size=batch_size):
                if not options["json"]:
                    width = 30 * done // max(total, 1)
                    sys.stderr.write(f"\r{memory_type:<12} [{'#' * width:<30}] {done}/{total}")
            if not options["json"]:
                sys.stderr.write("\n" if done else "")
            counts[memory_type] = done
        if options["json"]:
            self.stdout.write(json.dumps({"model": embedding_model_name(), "reembedded": counts}))
        else:
            self.stdout.write(self.style.SUCCESS(f"Re-embedded with {embedding_model_name()}: {counts}"))
