/*
 * dense_mv: y = A x with the n x n matrix A kept in a memadapt data file
 * of P row panels and swept through a memadapt store, several times, each
 * sweep checked against an in-core computation of the same product.
 *
 *     dense_mv [n [panels [iterations [file [timeline.csv]]]]]
 *
 * Defaults: n = 2048 (a 32 MiB matrix), 16 panels, 10 iterations, file
 * dense_mv.panels in the current directory (kept afterwards). Prints
 * "dense_mv: check ok" and exits 0 when every sweep matches; exits 1 on
 * a mismatch, 2 on a memadapt error, 64 on bad arguments.
 *
 * Build, after `crates/memadapt/install.sh $PREFIX`:
 *
 *     cc -std=c99 -O2 dense_mv.c $(pkg-config --cflags --libs memadapt) \
 *        -Wl,-rpath,$PREFIX/lib -o dense_mv
 *
 * (with PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig if $PREFIX is not a system
 * prefix), or straight from the workspace after
 * `cargo build --release -p memadapt`, statically:
 *
 *     cc -std=c99 -O2 -I crates/memadapt/include crates/memadapt/examples/c/dense_mv.c \
 *        target/release/libmemadapt.a -lpthread -ldl -lm -o dense_mv
 */
#include <memadapt.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Stops on a failed memadapt call with the library's message, which says
 * what failed, on which file, and what to do. */
#define CHECK(call)                                                          \
    do {                                                                     \
        int status_ = (call);                                                \
        if (status_ != MEMADAPT_OK) {                                        \
            fprintf(stderr, "dense_mv: %s failed (%d, %s): %s\n", #call,     \
                    status_, memadapt_strerror(status_),                     \
                    memadapt_last_error());                                  \
            exit(2);                                                         \
        }                                                                    \
    } while (0)

/* A(i, j), computed rather than stored, so that the in-core reference
 * needs no second copy of the matrix. Not symmetric, so that a panel
 * applied to the wrong rows shows. */
static double entry(size_t i, size_t j)
{
    return 1.0 / (1.0 + (double)((i * 7 + j * 13) % 101)) + (i == j ? 2.0 : 0.0);
}

static size_t arg(int argc, char **argv, int k, size_t fallback)
{
    if (argc <= k)
        return fallback;
    char *end;
    unsigned long long v = strtoull(argv[k], &end, 10);
    if (*end != '\0' || v == 0) {
        fprintf(stderr, "dense_mv: argument %d must be a positive integer, got '%s'\n"
                        "usage: dense_mv [n [panels [iterations [file [timeline.csv]]]]]\n",
                k, argv[k]);
        exit(64);
    }
    return (size_t)v;
}

static void *alloc(size_t count, size_t size)
{
    void *p = calloc(count, size);
    if (p == NULL) {
        fprintf(stderr, "dense_mv: out of memory for %zu x %zu bytes\n", count, size);
        exit(2);
    }
    return p;
}

int main(int argc, char **argv)
{
    size_t n = arg(argc, argv, 1, 2048);
    size_t panels = arg(argc, argv, 2, 16);
    size_t iterations = arg(argc, argv, 3, 10);
    const char *path = argc > 4 ? argv[4] : "dense_mv.panels";
    const char *timeline = argc > 5 ? argv[5] : NULL;
    if (panels > n) {
        fprintf(stderr, "dense_mv: %zu panels for %zu rows: at most one panel a row\n",
                panels, n);
        return 64;
    }
    /* All panels have the same size: the last one is padded with zero
     * rows when P does not divide n. */
    size_t rows = (n + panels - 1) / panels;
    size_t panel_bytes = rows * n * sizeof(double);

    /* 1. The matrix becomes a data file, one row panel at a time. */
    double *buf = alloc(rows * n, sizeof(double));
    memadapt_writer *w;
    CHECK(memadapt_file_create(path, panel_bytes, panels, MEMADAPT_F64, &w));
    for (size_t p = 0; p < panels; p++) {
        memset(buf, 0, panel_bytes);
        for (size_t r = 0; r < rows && p * rows + r < n; r++)
            for (size_t j = 0; j < n; j++)
                buf[r * n + j] = entry(p * rows + r, j);
        CHECK(memadapt_file_write_panel(w, p, buf, panel_bytes));
    }
    CHECK(memadapt_file_finish(w));
    free(buf);

    /* 2. The vectors and the in-core reference, allocated before the store
     * opens: it measures them as the program's other memory. */
    double *x = alloc(n, sizeof(double));
    double *y = alloc(n, sizeof(double));
    double *reference = alloc(n, sizeof(double));
    for (size_t j = 0; j < n; j++)
        x[j] = 1.0 / (double)(1 + j % 13);
    for (size_t i = 0; i < n; i++) {
        double s = 0.0;
        for (size_t j = 0; j < n; j++)
            s += entry(i, j) * x[j];
        reference[i] = s;
    }

    /* 3. Sweep the panels through the store: as many stay mapped as
     * memory allows. */
    memadapt_store *store;
    CHECK(memadapt_open(path, MEMADAPT_READ_ONLY | MEMADAPT_POLICY_MRU, 0, &store));
    struct memadapt_info info;
    CHECK(memadapt_info(store, &info));
    printf("dense_mv: n=%zu panels=%zu (%llu bytes each) iterations=%zu memadapt %s\n",
           n, panels, (unsigned long long)info.panel_bytes, iterations,
           memadapt_version());
    double worst = 0.0;
    for (size_t it = 0; it < iterations; it++) {
        memset(y, 0, n * sizeof(double));
        for (size_t k = 0; k < panels; k++) {
            size_t p, len;
            const void *data;
            CHECK(memadapt_next_panel(store, &p, &data, &len));
            /* The pointer is valid until the next panel call: use it now. */
            const double *a = data;
            for (size_t r = 0; r < rows && p * rows + r < n; r++) {
                double s = 0.0;
                for (size_t j = 0; j < n; j++)
                    s += a[r * n + j] * x[j];
                y[p * rows + r] = s;
            }
        }
        for (size_t i = 0; i < n; i++) {
            double err = fabs(y[i] - reference[i]) / fabs(reference[i]);
            if (!(err <= 1e-12)) {
                fprintf(stderr, "dense_mv: MISMATCH at iteration %zu, row %zu: %.17g, "
                                "in core %.17g\n", it, i, y[i], reference[i]);
                return 1;
            }
            if (err > worst)
                worst = err;
        }
    }

    struct memadapt_stats st;
    CHECK(memadapt_stats(store, &st));
    printf("dense_mv: accesses=%llu maps=%llu unmaps=%llu shortages=%llu probes=%llu "
           "panels_in=%llu mapped=%llu\n",
           (unsigned long long)st.accesses, (unsigned long long)st.maps,
           (unsigned long long)st.unmaps, (unsigned long long)st.shortages,
           (unsigned long long)st.probes, (unsigned long long)st.panels_in,
           (unsigned long long)st.mapped);
    if (timeline != NULL)
        CHECK(memadapt_write_timeline_csv(store, timeline));
    CHECK(memadapt_close(store));
    free(x);
    free(y);
    free(reference);
    printf("dense_mv: max relative error %.3g over %zu iterations\n", worst, iterations);
    printf("dense_mv: check ok\n");
    return 0;
}
