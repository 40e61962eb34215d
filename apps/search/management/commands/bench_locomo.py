from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "LOCOMO retrieval benchmark: evidence recall@k per search method against raw baselines."

    def add_arguments(self, parser):
        parser.add_argument("file", help="A LOCOMO-format JSON file, e.g. ../shared/data/locomo-dev.json")
        parser.add_argument("--methods", default="bm25,embedding,hybrid,fuzzy")
        parser.add_argument("--output", default="bench/results/locomo.json")

    def handle(self, *args, file, methods, output, **options):
        from bench.locomo import run

        run(file, methods=tuple(methods.split(",")), output=output, log=self.stdout.write)
