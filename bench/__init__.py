"""The benchmarks: `python -m bench --list` names them by the question each answers (bench/README.md)."""
