"""`make bench`: run every benchmark and write JSON results under bench/results/."""

import sys


def main() -> int:
    print("No benchmarks are implemented yet.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
