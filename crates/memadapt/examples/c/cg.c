/*
 * cg: conjugate gradient on an eighth-order finite-difference 3D Laplacian
 * (25-point stencil, Dirichlet boundary, as in paper 002 §5.2), its matrix
 * in CSR split by rows into P panels of a memadapt data file. The same
 * solver runs in the four ways of the paper's Table 1:
 *
 *     incore  reads the whole matrix into memory first (anonymous memory:
 *             under pressure it is swapped)
 *     ooc     a conventional out-of-core code: one panel buffer, each
 *             panel read (pread) into it at every matrix-vector product
 *     mmap    the in-core code reading the matrix through one read-only
 *             map of the whole file
 *     mema    memadapt: panels mapped on demand, as many kept as memory
 *             allows (--fixed K: always K, the static scheme of Fig. 3;
 *             --rss-only: the paper's Figure 2 on RSS alone)
 *
 * Usage:
 *     cg create FILE n P            the matrix for an n x n x n grid
 *     cg MODE FILE [--iterations K] [--tol T] [--seconds S] [--fixed K]
 *                  [--rss-only] [--x-out FILE] [--timeline CSV]
 *
 * Solves A x = 1 from x = 0 until the relative residual is below T
 * (default 1e-8) or K iterations (default 10000) or S seconds (then, if
 * it converges first, it starts again from x = 0, so a benchmark can run
 * for a set time). Prints one line per iteration,
 *     iter K t T dt DT res R
 * (T seconds since the start of the solve, DT of this iteration), after
 *     cg: solve starts at E s since the epoch
 * (so that a benchmark can line up two jobs' iterations), then a
 * summary. --x-out writes x as raw doubles. Exit 0, 1 if it did not
 * converge when asked to (no --seconds), 2 on an error, 64 on bad usage.
 *
 * Build, after `crates/memadapt/install.sh $PREFIX`:
 *     cc -std=c99 -O2 cg.c $(pkg-config --cflags --libs memadapt) -Wl,-rpath,$PREFIX/lib -o cg
 * or from the workspace after `cargo build --release -p memadapt`:
 *     cc -std=c99 -O2 -I crates/memadapt/include crates/memadapt/examples/c/cg.c \
 *        target/release/libmemadapt.a -lpthread -ldl -lm -o cg
 *
 * Panel layout (bytes, all panels padded to the size of the largest):
 *     0 rows u64, 8 nnz u64, 16 first row u64, 24 n u64,
 *     32 values f64[nnz], then row pointers i64[rows + 1] (from 0),
 *     then column indices i32[nnz].
 */
#define _POSIX_C_SOURCE 200809L
#include <memadapt.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CHECK(call)                                                          \
    do {                                                                     \
        int status_ = (call);                                                \
        if (status_ != MEMADAPT_OK) {                                        \
            fprintf(stderr, "cg: %s failed (%s): %s\n", #call,               \
                    memadapt_strerror(status_), memadapt_last_error());      \
            exit(2);                                                         \
        }                                                                    \
    } while (0)

#define HALF 4 /* stencil half-width: eighth order */
#define STENCIL (6 * HALF + 1)

/* -d2/dx2 to eighth order: centre and the k-th neighbours on each side. */
static const double coef[HALF + 1] = {205.0 / 72, -8.0 / 5, 1.0 / 5, -8.0 / 315, 1.0 / 560};

static void die(const char *what)
{
    fprintf(stderr, "cg: %s: %s\n", what, strerror(errno));
    exit(2);
}

static void *alloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    if (p == NULL) {
        fprintf(stderr, "cg: out of memory for %zu bytes\n", bytes);
        exit(2);
    }
    return p;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static size_t panel_bytes_for(size_t rows)
{
    size_t nnz = rows * STENCIL;
    return 32 + 8 * nnz + 8 * (rows + 1) + ((4 * nnz + 7) & ~(size_t)7);
}

/* Row `row` of the grid n^3: its entries, column-ordered; returns count. */
static size_t matrix_row(size_t n, size_t row, double *val, int32_t *col)
{
    size_t i = row / (n * n), j = (row / n) % n, k = row % n, m = 0;
    long c[3] = {(long)i, (long)j, (long)k};
    long stride[3] = {(long)(n * n), (long)n, 1};
    /* Neighbours in increasing column order: i-axis below, j below, k
     * below, centre, k above, j above, i above. */
    for (int axis = 0; axis < 3; axis++)
        for (int d = HALF; d >= 1; d--)
            if (c[axis] - d >= 0) {
                val[m] = coef[d];
                col[m++] = (int32_t)((long)row - d * stride[axis]);
            }
    val[m] = 3 * coef[0];
    col[m++] = (int32_t)row;
    for (int axis = 2; axis >= 0; axis--)
        for (int d = 1; d <= HALF; d++)
            if (c[axis] + d < (long)n) {
                val[m] = coef[d];
                col[m++] = (int32_t)((long)row + d * stride[axis]);
            }
    return m;
}

static int create(const char *path, size_t n, size_t panels)
{
    size_t total = n * n * n;
    if (n < 2 || panels == 0 || panels > total || total > INT32_MAX) {
        fprintf(stderr, "cg: create needs n >= 2 (n^3 < 2^31) and 1 <= P <= n^3\n");
        return 64;
    }
    size_t rows = (total + panels - 1) / panels;
    size_t bytes = panel_bytes_for(rows);
    unsigned char *buf = alloc(bytes);
    double rv[STENCIL];
    int32_t rc[STENCIL];
    memadapt_writer *w;
    CHECK(memadapt_file_create(path, bytes, panels, MEMADAPT_BYTES, &w));
    for (size_t p = 0; p < panels; p++) {
        memset(buf, 0, bytes);
        uint64_t first = p * rows, nrows = first < total ? (total - first < rows ? total - first : rows) : 0;
        uint64_t nnz = 0;
        double *val = (double *)(buf + 32);
        /* Count first: the pointers and columns follow the values. */
        for (uint64_t r = 0; r < nrows; r++)
            nnz += matrix_row(n, first + r, rv, rc);
        int64_t *ptr = (int64_t *)(buf + 32 + 8 * nnz);
        int32_t *col = (int32_t *)(buf + 32 + 8 * nnz + 8 * (nrows + 1));
        uint64_t at = 0;
        ptr[0] = 0;
        for (uint64_t r = 0; r < nrows; r++) {
            size_t m = matrix_row(n, first + r, rv, rc);
            memcpy(val + at, rv, m * sizeof(double));
            memcpy(col + at, rc, m * sizeof(int32_t));
            at += m;
            ptr[r + 1] = (int64_t)at;
        }
        uint64_t head[4] = {nrows, nnz, first, (uint64_t)n};
        memcpy(buf, head, sizeof head);
        CHECK(memadapt_file_write_panel(w, p, buf, bytes));
    }
    CHECK(memadapt_file_finish(w));
    free(buf);
    printf("cg: created %s: n=%zu (%zu unknowns), %zu panels of %zu bytes\n", path, n,
           total, panels, bytes);
    return 0;
}

/* y[rows of this panel] = panel x */
static void spmv_panel(const unsigned char *panel, const double *x, double *y)
{
    uint64_t head[4];
    memcpy(head, panel, sizeof head);
    uint64_t rows = head[0], nnz = head[1], first = head[2];
    const double *val = (const double *)(panel + 32);
    const int64_t *ptr = (const int64_t *)(panel + 32 + 8 * nnz);
    const int32_t *col = (const int32_t *)(panel + 32 + 8 * nnz + 8 * (rows + 1));
    for (uint64_t r = 0; r < rows; r++) {
        double s = 0.0;
        for (int64_t k = ptr[r]; k < ptr[r + 1]; k++)
            s += val[k] * x[col[k]];
        y[first + r] = s;
    }
}

enum mode { INCORE, OOC, MMAP, MEMA };

struct matrix {
    enum mode mode;
    size_t panels, panel_bytes, align, slot;
    int fd;
    unsigned char *all;      /* incore: panels back to back; mmap: the file */
    unsigned char *buffer;   /* ooc */
    memadapt_store *store;   /* mema */
};

static void read_panel(const struct matrix *m, size_t p, unsigned char *dst)
{
    size_t done = 0;
    off_t at = (off_t)(m->align + p * m->slot);
    while (done < m->panel_bytes) {
        ssize_t got = pread(m->fd, dst + done, m->panel_bytes - done, at + (off_t)done);
        if (got <= 0)
            die("reading a panel");
        done += (size_t)got;
    }
}

static const unsigned char *get_panel(struct matrix *m, size_t p)
{
    switch (m->mode) {
    case INCORE:
        return m->all + p * m->panel_bytes;
    case MMAP:
        return m->all + m->align + p * m->slot;
    case OOC:
        read_panel(m, p, m->buffer);
        return m->buffer;
    case MEMA: {
        size_t index, len;
        const void *data;
        CHECK(memadapt_next_panel(m->store, &index, &data, &len));
        if (index != p) {
            fprintf(stderr, "cg: sweep out of step (panel %zu, expected %zu)\n", index, p);
            exit(2);
        }
        return data;
    }
    }
    return NULL;
}

static void matvec(struct matrix *m, const double *x, double *y)
{
    for (size_t p = 0; p < m->panels; p++)
        spmv_panel(get_panel(m, p), x, y); /* mema: valid until the next panel call */
}

/* Reads the memadapt header (its format is in crates/memadapt/README.md)
 * for the modes that read the file themselves. */
static void open_raw(struct matrix *m, const char *path)
{
    m->fd = open(path, O_RDONLY);
    if (m->fd < 0)
        die(path);
    unsigned char h[64];
    if (pread(m->fd, h, sizeof h, 0) != (ssize_t)sizeof h || memcmp(h, "MEMADAPT", 8) != 0) {
        fprintf(stderr, "cg: %s is not a memadapt data file: create it with `cg create`\n", path);
        exit(2);
    }
    uint64_t p, size, align;
    memcpy(&p, h + 16, 8);
    memcpy(&size, h + 24, 8);
    memcpy(&align, h + 32, 8);
    m->panels = p;
    m->panel_bytes = size;
    m->align = align;
    m->slot = (size + align - 1) / align * align;
}

static double dot(size_t n, const double *a, const double *b)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void usage(void)
{
    fprintf(stderr, "usage: cg create FILE n P\n"
                    "       cg incore|ooc|mmap|mema FILE [--iterations K] [--tol T] "
                    "[--seconds S] [--fixed K] [--rss-only] [--x-out FILE] [--timeline CSV]\n");
    exit(64);
}

static double number(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (*end != '\0' || !(v >= 0)) {
        fprintf(stderr, "cg: '%s' is not a non-negative number\n", s);
        usage();
    }
    return v;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3)
        usage();
    if (strcmp(argv[1], "create") == 0) {
        if (argc != 5)
            usage();
        return create(argv[2], (size_t)number(argv[3]), (size_t)number(argv[4]));
    }
    struct matrix m = {.fd = -1};
    const char *modes[] = {"incore", "ooc", "mmap", "mema"};
    int known = 0;
    for (int i = 0; i < 4; i++)
        if (strcmp(argv[1], modes[i]) == 0)
            m.mode = (enum mode)i, known = 1;
    if (!known)
        usage();
    const char *path = argv[2], *x_out = NULL, *timeline = NULL;
    double tol = 1e-8, seconds = 0;
    size_t max_iterations = 10000, fixed = 0;
    unsigned rss_only = 0;
    for (int a = 3; a < argc; a++) {
        if (strcmp(argv[a], "--rss-only") == 0) {
            rss_only = MEMADAPT_RSS_ONLY;
            continue;
        }
        if (a + 1 >= argc)
            usage();
        const char *flag = argv[a], *value = argv[++a];
        if (strcmp(flag, "--iterations") == 0)
            max_iterations = (size_t)number(value);
        else if (strcmp(flag, "--tol") == 0)
            tol = number(value);
        else if (strcmp(flag, "--seconds") == 0)
            seconds = number(value);
        else if (strcmp(flag, "--fixed") == 0)
            fixed = (size_t)number(value);
        else if (strcmp(flag, "--x-out") == 0)
            x_out = value;
        else if (strcmp(flag, "--timeline") == 0)
            timeline = value;
        else
            usage();
    }

    open_raw(&m, path);
    uint64_t head[4];
    if (pread(m.fd, head, sizeof head, (off_t)m.align) != (ssize_t)sizeof head)
        die("reading panel 0");
    size_t n = head[3], total = n * n * n;

    /* The vectors first, and written: memadapt measures them at open as
     * the program's other memory, and calloc's fresh pages are not in the
     * RSS until written (nor would a memset to zero after calloc be
     * kept by the compiler). */
    double *b = alloc(total * 8), *x = alloc(total * 8), *r = alloc(total * 8);
    double *p = alloc(total * 8), *q = alloc(total * 8);
    for (size_t i = 0; i < total; i++)
        b[i] = x[i] = r[i] = p[i] = q[i] = 1.0;

    switch (m.mode) {
    case INCORE:
        m.all = alloc(m.panels * m.panel_bytes);
        for (size_t i = 0; i < m.panels; i++)
            read_panel(&m, i, m.all + i * m.panel_bytes);
        break;
    case OOC:
        m.buffer = alloc(m.panel_bytes);
        break;
    case MMAP: {
        struct stat st;
        if (fstat(m.fd, &st) != 0)
            die(path);
        m.all = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, m.fd, 0);
        if (m.all == MAP_FAILED)
            die("mmap");
        break;
    }
    case MEMA:
        CHECK(memadapt_open(path, MEMADAPT_READ_ONLY | MEMADAPT_POLICY_MRU | rss_only, fixed,
                            &m.store));
        break;
    }
    printf("cg: %s n=%zu unknowns=%zu panels=%zu panel_bytes=%zu\n", modes[m.mode], n, total,
           m.panels, m.panel_bytes);

    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    printf("cg: solve starts at %.6f s since the epoch\n",
           (double)wall.tv_sec + 1e-9 * (double)wall.tv_nsec);
    double start = now(), last = start, bnorm = sqrt(dot(total, b, b)), res = 1.0;
    size_t it = 0, restarts = 0;
    int converged = 0;
    while (it < max_iterations) {
        /* From x = 0: r = b, p = r. */
        memset(x, 0, total * 8);
        memcpy(r, b, total * 8);
        memcpy(p, b, total * 8);
        double rr = dot(total, r, r);
        converged = 0;
        while (it < max_iterations) {
            matvec(&m, p, q);
            double alpha = rr / dot(total, p, q);
            for (size_t i = 0; i < total; i++) {
                x[i] += alpha * p[i];
                r[i] -= alpha * q[i];
            }
            double rr_new = dot(total, r, r);
            res = sqrt(rr_new) / bnorm;
            it++;
            double t = now();
            printf("iter %zu t %.6f dt %.6f res %.3e\n", it, t - start, t - last, res);
            last = t;
            if (res < tol) {
                converged = 1;
                break;
            }
            double beta = rr_new / rr;
            rr = rr_new;
            for (size_t i = 0; i < total; i++)
                p[i] = r[i] + beta * p[i];
            if (seconds > 0 && t - start >= seconds)
                break;
        }
        if (!(converged && seconds > 0 && now() - start < seconds))
            break;
        restarts++;
    }
    double elapsed = now() - start;
    printf("cg: %s %s after %zu iterations (%zu restarts), residual %.3e, %.6f s/iteration\n",
           modes[m.mode], converged ? "converged" : "stopped", it, restarts, res,
           it ? elapsed / (double)it : 0.0);
    if (m.mode == MEMA) {
        struct memadapt_stats st;
        CHECK(memadapt_stats(m.store, &st));
        printf("cg: memadapt shortages=%llu probes=%llu panels_in=%llu maps=%llu\n",
               (unsigned long long)st.shortages, (unsigned long long)st.probes,
               (unsigned long long)st.panels_in, (unsigned long long)st.maps);
        if (timeline)
            CHECK(memadapt_write_timeline_csv(m.store, timeline));
        CHECK(memadapt_close(m.store));
    }
    if (x_out) {
        FILE *f = fopen(x_out, "wb");
        if (f == NULL || fwrite(x, 8, total, f) != total || fclose(f) != 0)
            die(x_out);
    }
    return converged || seconds > 0 ? 0 : 1;
}
