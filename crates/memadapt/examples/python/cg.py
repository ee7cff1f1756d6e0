#!/usr/bin/env python3
"""cg.py: examples/c/cg.c in Python: conjugate gradient on an eighth-order
finite-difference 3D Laplacian (25-point stencil), its CSR matrix split by
rows into P panels of a memadapt data file (the same file format as cg.c),
run in the four ways of paper 002's Table 1:

    incore  the whole matrix read into memory first
    ooc     one panel buffer, each panel read (pread) at every product
    mmap    the in-core code reading the matrix through one read-only map
    mema    memadapt: panels as zero-copy NumPy arrays, as many kept
            mapped as memory allows (--fixed K: always K)

    cg.py create FILE n P
    cg.py MODE FILE [--iterations K] [--tol T] [--seconds S] [--fixed K]
                    [--x-out FILE] [--timeline CSV]

Prints `iter K t T dt DT res R` per iteration, then a summary, like cg.c.
Needs numpy and the memadapt package (installed, or found beside this file
in the workspace, with libmemadapt.so built: see the package's docstring).
"""

import argparse
import mmap
import os
import sys
import time

import numpy as np

try:
    import memadapt
except ImportError:  # run from the workspace, the package not installed
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../python"))
    import memadapt

HALF = 4
COEF = np.array([205 / 72, -8 / 5, 1 / 5, -8 / 315, 1 / 560])


def offsets():
    """(axis, signed distance) in cg.c's column order."""
    out = [(axis, -d) for axis in range(3) for d in range(HALF, 0, -1)]
    out.append((None, 0))
    out += [(axis, d) for axis in (2, 1, 0) for d in range(1, HALF + 1)]
    return out


def panel_bytes_for(rows):
    nnz = rows * (6 * HALF + 1)
    return 32 + 8 * nnz + 8 * (rows + 1) + (4 * nnz + 7) // 8 * 8


def make_panel(n, first, rows, nbytes):
    """Rows first..first+rows of the matrix as one panel (bytes)."""
    row = np.arange(first, first + rows, dtype=np.int64)
    coords = np.stack([row // (n * n), (row // n) % n, row % n])
    stride = np.array([n * n, n, 1])
    cols, vals, ok = [], [], []
    for axis, d in offsets():
        if axis is None:
            cols.append(row)
            vals.append(np.full(rows, 3 * COEF[0]))
            ok.append(np.ones(rows, bool))
        else:
            c = coords[axis] + d
            cols.append(row + d * stride[axis])
            vals.append(np.full(rows, COEF[abs(d)]))
            ok.append((c >= 0) & (c < n))
    cols, vals, ok = (np.stack(a, axis=1) for a in (cols, vals, ok))
    nnz = int(ok.sum())
    buf = np.zeros(nbytes, np.uint8)
    buf[:32].view(np.uint64)[:] = [rows, nnz, first, n]
    at = 32
    buf[at : at + 8 * nnz].view(np.float64)[:] = vals[ok]
    at += 8 * nnz
    ptr = np.zeros(rows + 1, np.int64)
    np.cumsum(ok.sum(axis=1), out=ptr[1:])
    buf[at : at + 8 * (rows + 1)].view(np.int64)[:] = ptr
    at += 8 * (rows + 1)
    buf[at : at + 4 * nnz].view(np.int32)[:] = cols[ok]
    return buf


def create(path, n, panels):
    total = n**3
    rows = -(-total // panels)
    nbytes = panel_bytes_for(rows)
    with memadapt.Writer(path, nbytes, panels, np.uint8) as w:
        for p in range(panels):
            first = min(p * rows, total)
            w.write(p, make_panel(n, first, min(rows, total - first), nbytes))
    print(f"cg: created {path}: n={n} ({total} unknowns), {panels} panels of {nbytes} bytes")


def spmv_panel(a, x, y, work):
    """y[rows of panel a] = a x, allocating nothing: `work` holds the
    products (memadapt takes the RSS besides panels as measured at open,
    so the loop must not grow the heap; see the package's README)."""
    rows, nnz, first, _ = (int(v) for v in a[:32].view(np.uint64))
    at = 32
    val = a[at : at + 8 * nnz].view(np.float64)
    at += 8 * nnz
    ptr = a[at : at + 8 * (rows + 1)].view(np.int64)
    at += 8 * (rows + 1)
    col = a[at : at + 4 * nnz].view(np.int32)
    t, index = work[0][:nnz], work[1][:nnz]
    # take would convert int32 columns to a temporary index array, and
    # mode "raise" would buffer its output: both would grow the heap.
    np.copyto(index, col)
    np.take(x, index, out=t, mode="clip")
    np.multiply(t, val, out=t)
    # Every row has its diagonal, so no segment is empty.
    np.add.reduceat(t, ptr[:-1], out=y[first : first + rows])


class Raw:
    """The modes that read the file themselves: the header's layout is in
    crates/memadapt/README.md."""

    def __init__(self, path, mode, work):
        self.work = work
        self.fd = os.open(path, os.O_RDONLY)
        h = os.pread(self.fd, 64, 0)
        if h[:8] != b"MEMADAPT":
            sys.exit(f"cg: {path} is not a memadapt data file: create it with `cg.py create`")
        self.panels, self.panel_bytes, self.align = (
            int(v) for v in np.frombuffer(h[16:40], np.uint64)
        )
        self.slot = -(-self.panel_bytes // self.align) * self.align
        self.mode = mode
        if mode == "incore":
            self.all = np.empty((self.panels, self.panel_bytes), np.uint8)
            for p in range(self.panels):
                self.read(p, self.all[p])
        elif mode == "ooc":
            self.buffer = np.empty(self.panel_bytes, np.uint8)
        else:
            self.map = mmap.mmap(self.fd, 0, prot=mmap.PROT_READ)
            self.all = np.frombuffer(self.map, np.uint8)

    def read(self, p, dst):
        got = os.preadv(self.fd, [dst], self.align + p * self.slot)
        if got != self.panel_bytes:
            sys.exit(f"cg: short read of panel {p}")

    def matvec(self, x, y):
        for p in range(self.panels):
            if self.mode == "incore":
                a = self.all[p]
            elif self.mode == "ooc":
                self.read(p, self.buffer)
                a = self.buffer
            else:
                off = self.align + p * self.slot
                a = self.all[off : off + self.panel_bytes]
            spmv_panel(a, x, y, self.work)


class Adaptive:
    def __init__(self, path, fixed, work):
        self.work = work
        self.store = memadapt.open(path, fixed=fixed)
        self.panels, self.panel_bytes = self.store.panels, self.store.panel_bytes

    def matvec(self, x, y):
        for _, a in self.store.sweep():
            spmv_panel(a, x, y, self.work)


def solve(args):
    with open(args.file, "rb") as f:
        f.seek(int(np.frombuffer(f.read(40)[32:40], np.uint64)[0]) + 24)
        n = int(np.frombuffer(f.read(8), np.uint64)[0])
    total = n**3
    # The vectors and work arrays first, touched: memadapt measures them
    # at open as the program's other memory.
    # (np.zeros would not do: calloc's fresh pages are not resident.)
    b = np.ones(total)
    x, r, p, q, tmp = (np.ones(total) for _ in range(5))
    with open(args.file, "rb") as f:
        panel_bytes = int(np.frombuffer(f.read(32)[24:32], np.uint64)[0])
    # more than the nonzeros of a panel
    work = (np.ones(panel_bytes // 8), np.ones(panel_bytes // 8, np.intp))
    if args.mode == "mema":
        m = Adaptive(args.file, args.fixed, work)
    else:
        m = Raw(args.file, args.mode, work)
    print(f"cg: {args.mode} n={n} unknowns={total} panels={m.panels} panel_bytes={m.panel_bytes}")
    start = last = time.monotonic()
    bnorm = np.linalg.norm(b)
    it = restarts = 0
    res, converged = 1.0, False
    while it < args.iterations:
        x[:] = 0
        r[:] = b
        p[:] = b
        rr = r @ r
        converged = False
        while it < args.iterations:
            m.matvec(p, q)
            alpha = rr / (p @ q)
            np.multiply(p, alpha, out=tmp)
            x += tmp
            np.multiply(q, alpha, out=tmp)
            r -= tmp
            rr_new = r @ r
            res = np.sqrt(rr_new) / bnorm
            it += 1
            t = time.monotonic()
            print(f"iter {it} t {t - start:.6f} dt {t - last:.6f} res {res:.3e}", flush=True)
            last = t
            if res < args.tol:
                converged = True
                break
            p *= rr_new / rr
            p += r
            rr = rr_new
            if args.seconds and t - start >= args.seconds:
                break
        if not (converged and args.seconds and time.monotonic() - start < args.seconds):
            break
        restarts += 1
    elapsed = time.monotonic() - start
    print(
        f"cg: {args.mode} {'converged' if converged else 'stopped'} after {it} iterations "
        f"({restarts} restarts), residual {res:.3e}, {elapsed / max(it, 1):.6f} s/iteration"
    )
    if args.mode == "mema":
        s = m.store.stats()
        print(
            f"cg: memadapt shortages={s['shortages']} probes={s['probes']} "
            f"panels_in={s['panels_in']} maps={s['maps']}"
        )
        if args.timeline:
            m.store.write_timeline_csv(args.timeline)
        m.store.close()
    if args.x_out:
        x.tofile(args.x_out)
    return 0 if converged or args.seconds else 1


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["create"]:
        if len(argv) != 4:
            sys.exit("usage: cg.py create FILE n P")
        create(argv[1], int(argv[2]), int(argv[3]))
        return 0
    ap = argparse.ArgumentParser(prog="cg.py")
    ap.add_argument("mode", choices=["incore", "ooc", "mmap", "mema"])
    ap.add_argument("file")
    ap.add_argument("--iterations", type=int, default=10000)
    ap.add_argument("--tol", type=float, default=1e-8)
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--fixed", type=int, default=0)
    ap.add_argument("--x-out")
    ap.add_argument("--timeline")
    return solve(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
