"""A one-line progress bar on stderr, shared by the export and import commands."""

import sys


def progress_bar(enabled: bool):
    def show(kind: str, done: int, total: int):
        if not enabled:
            return
        width = 30 * done // max(total, 1) if total else 30
        sys.stderr.write(f"\r{kind:<24} [{'#' * min(width, 30):<30}] {done}/{total}")
        if done >= total:
            sys.stderr.write("\n")

    return show
