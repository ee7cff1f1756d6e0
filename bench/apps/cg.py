"""A SciPy conjugate-gradient solve of the 3-D Poisson equation (7-point
stencil, N^3 unknowns, CSR): the matrix is built first (scipy.sparse.kron,
whose intermediates make the peak well above the steady working set), then
ITERATIONS CG steps sweep it (a CSR sweep, the pattern of the papers' CG).
Prints the residual norm, which depends only on N and ITERATIONS: the same
line whatever stopped or paged the process in between.

    python cg.py N ITERATIONS
"""
import sys

import numpy as np
import scipy.sparse as sp


def poisson3d(n):
    one = sp.diags([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1], format="csr")
    eye = sp.identity(n, format="csr")
    a = sp.kron(sp.kron(one, eye), eye) + sp.kron(sp.kron(eye, one), eye) + sp.kron(sp.kron(eye, eye), one)
    return a.tocsr()


def main():
    n, iterations = int(sys.argv[1]), int(sys.argv[2])
    a = poisson3d(n)
    b = np.ones(a.shape[0])
    x = np.zeros_like(b)
    r = b.copy()
    p = r.copy()
    rs = r @ r
    for _ in range(iterations):
        ap = a @ p
        alpha = rs / (p @ ap)
        x += alpha * p
        r -= alpha * ap
        rs_new = r @ r
        p *= rs_new / rs
        p += r
        rs = rs_new
    print(f"cg n {n} iterations {iterations} residual {np.sqrt(rs):.12e}", flush=True)


if __name__ == "__main__":
    main()
