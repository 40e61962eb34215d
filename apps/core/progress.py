"""The management commands' output: their one-line progress bar on stderr, and `--json`."""

import json
import sys


def show_progress(label: str, done: int, total: int) -> None:
    """Redraws `label`'s bar in place; the line ends once `done` reaches `total`."""
    filled = 30 * done // total if total else 30
    sys.stderr.write(f"\r{label:<24} [{'#' * min(filled, 30):<30}] {done}/{total}")
    if done >= total:
        sys.stderr.write("\n")


def wrote_json(command, options: dict, data, **dumps) -> bool:
    """Writes `data` as the command's JSON answer when `--json` was given; says whether it did."""
    if options["json"]:
        command.stdout.write(json.dumps(data, **dumps))
    return options["json"]
