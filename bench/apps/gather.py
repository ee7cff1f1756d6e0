"""Random gather and scatter over a large NumPy array: MIB MiB of float64,
and ITERATIONS rounds that each read and update a fixed random set of a
tenth of its elements (the page-level pattern of a hash join or a
particle-in-cell deposit: every page touched, in random order). Prints a
checksum that depends only on the arguments.

    python gather.py MIB ITERATIONS
"""
import sys

import numpy as np


def main():
    mib, iterations = int(sys.argv[1]), int(sys.argv[2])
    n = (mib << 20) // 8
    rng = np.random.default_rng(12345)
    a = np.arange(n, dtype=np.float64)
    idx = rng.integers(0, n, size=n // 10)
    total = 0.0
    for _ in range(iterations):
        total += a[idx].sum()
        a[idx] *= 0.5
    print(f"gather mib {mib} iterations {iterations} checksum {total:.12e}", flush=True)


if __name__ == "__main__":
    main()
