from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "LOCOMO retrieval benchmark: evidence recall@k per search method against raw baselines."

    def add_arguments(self, parser):
        parser.add_argument("file", help="A LOCOMO-format JSON file, e.g. ../shared/data/locomo-dev.json")
        parser.add_argument("--methods", default=None, help="default: bm25,embedding,hybrid,fuzzy (with --extract: hybrid)")
        parser.add_argument("--output", default=None, help="default: bench/results/locomo.json (with --extract: locomo-extract.json)")
        parser.add_argument(
            "--extract", action="store_true",
            help="run memory extraction with the configured LLM (rules: the temporal normaliser) and report recall "
            "before and after it, and over messages + episodic + semantic",
        )

    def handle(self, *args, file, methods, output, extract, **options):
        from bench.locomo import run, run_extract

        if extract:
            run_extract(
                file, methods=tuple((methods or "hybrid").split(",")),
                output=output or "bench/results/locomo-extract.json", log=self.stdout.write,
            )
            return
        run(
            file, methods=tuple((methods or "bm25,embedding,hybrid,fuzzy").split(",")),
            output=output or "bench/results/locomo.json", log=self.stdout.write,
        )
