"""The one percentile of the tests and the benchmarks."""

import math


def percentile(values, share: float) -> float:
    """Nearest rank: the smallest of `values` with at least `share` of them at or below it."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("a percentile of no values")
    rank = math.ceil(round(share * len(ordered), 9))  # 0.95 * 20 is 19.000000000000004 in floats
    return ordered[max(0, rank - 1)]
