"""The management commands' one-line progress bar, on stderr."""

import sys


def show_progress(label: str, done: int, total: int) -> None:
    """Redraws `label`'s bar in place; the line ends once `done` reaches `total`."""
    filled = 30 * done // total if total else 30
    sys.stderr.write(f"\r{label:<24} [{'#' * min(filled, 30):<30}] {done}/{total}")
    if done >= total:
        sys.stderr.write("\n")
