"""Where the benchmarks find their public data: `BENCH_DATA_DIR`, by default `../shared/data/`
beside the repository. A missing file stops the run with one line saying where to get it."""

import os
from pathlib import Path

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"

SOURCES = {
    "tau-airline-dev.json": (
        "the first 100 trajectories of historical_trajectories/gpt-4o-airline.json in "
        "https://github.com/sierra-research/tau-bench (MIT)"
    ),
    "locomo-dev.json": (
        "conversations conv-26, conv-30, conv-41, conv-42 and conv-43 of data/locomo10.json in "
        "https://github.com/snap-research/LoCoMo (CC BY-NC 4.0)"
    ),
}


def data_file(name: str) -> Path:
    path = Path(os.environ.get("BENCH_DATA_DIR") or DEFAULT_DATA_DIR) / name
    if not path.is_file():
        raise SystemExit(f"{path} is missing: save {SOURCES[name]} there, or set BENCH_DATA_DIR to its folder.")
    return path
