"""A NumPy 3-D Jacobi stencil: two M^3 float64 grids, each of ITERATIONS
sweeps averages the six neighbours of every interior point into the other
grid (a structured sweep of the whole working set, no temporaries beyond
one grid). Prints a checksum that depends only on M and ITERATIONS.

    python stencil.py M ITERATIONS
"""
import sys

import numpy as np


def main():
    m, iterations = int(sys.argv[1]), int(sys.argv[2])
    a = np.zeros((m, m, m))
    a[0, :, :] = 1.0  # a hot face
    b = a.copy()
    for _ in range(iterations):
        c = b[1:-1, 1:-1, 1:-1]
        np.add(a[:-2, 1:-1, 1:-1], a[2:, 1:-1, 1:-1], out=c)
        c += a[1:-1, :-2, 1:-1]
        c += a[1:-1, 2:, 1:-1]
        c += a[1:-1, 1:-1, :-2]
        c += a[1:-1, 1:-1, 2:]
        c /= 6.0
        a, b = b, a
    print(f"stencil m {m} iterations {iterations} checksum {a.sum():.12e}", flush=True)


if __name__ == "__main__":
    main()
