/*
 * memadapt.h: the C interface of memadapt, a library that keeps as much of
 * a program's data set in memory as the machine can currently spare, and
 * no more (paper 002: "panels" mapped on demand, their number following
 * memory pressure judged from the program's own RSS).
 *
 * The model. The data set is a file of P panels of equal size, created
 * once from the program's arrays (memadapt_file_create, ..._write_panel,
 * ..._finish). A store opened on the file (memadapt_open) hands out panels
 * as pointers into memory-mapped file pages (memadapt_panel,
 * memadapt_next_panel); before every such access it measures the RSS,
 * unmaps panels when memory was taken away and now and then keeps one
 * more when memory seems free. Under pressure the program degrades like
 * an out-of-core code instead of thrashing; without pressure it runs in
 * core.
 *
 *     memadapt_store *s;
 *     if (memadapt_open("A.panels", MEMADAPT_READ_ONLY, 0, &s) != MEMADAPT_OK)
 *         die(memadapt_last_error());
 *     for (int it = 0; it < iterations; it++)
 *         for (size_t k = 0; k < P; k++) {
 *             size_t i, len; const void *p;
 *             if (memadapt_next_panel(s, &i, &p, &len) != MEMADAPT_OK)
 *                 die(memadapt_last_error());
 *             work_on_panel(i, (const double *)p, len / sizeof(double));
 *         }
 *     memadapt_close(s);
 *
 * Errors. Every function except the three string functions returns a
 * status: MEMADAPT_OK (0) or a negative enum memadapt_status code. After
 * a failure, memadapt_last_error() describes it: what failed, on which
 * file and panel, and what to do. Out-parameters are set to NULL / 0
 * before anything can fail, so they are defined after any call that got
 * valid pointers. A NULL pointer argument is reported (MEMADAPT_E_NULL),
 * except that memadapt_close(NULL) and memadapt_file_abort(NULL) do
 * nothing, as free(NULL). No call lets an internal error unwind into C:
 * it returns MEMADAPT_E_INTERNAL, and the store concerned can then only
 * be closed.
 *
 * PANEL POINTER LIFETIME. A pointer returned by memadapt_panel,
 * memadapt_panel_mut, memadapt_next_panel or memadapt_next_panel_mut
 * points into a mapping that the store may remove. It stays valid until
 * the next call ON THE SAME STORE of one of these, which may unmap any
 * panel that is not pinned, whether they succeed or fail:
 *
 *     memadapt_panel, memadapt_panel_mut,
 *     memadapt_next_panel, memadapt_next_panel_mut,
 *     memadapt_pin, memadapt_pin_panel, memadapt_pin_panel_mut
 *                                         (each is a panel access)
 *     memadapt_close                      (unmaps every panel)
 *
 * The other calls never map or unmap: memadapt_unpin, memadapt_flush,
 * memadapt_set_priority, memadapt_set_other_memory, memadapt_set_tolerance,
 * memadapt_stats,
 * memadapt_info, memadapt_write_timeline_csv. So the normal pattern is to
 * get a panel, work on it, and get the next one. To use two panels at
 * once (say panel i while reading panel i+1), pin the one to keep:
 * memadapt_pin(s, i) maps panel i and keeps it mapped (its pointer valid,
 * the same address) until memadapt_unpin(s, i) and the next access after
 * that. Pinned panels are never unmapped to make room, even under memory
 * pressure, so pin few panels and briefly. A panel unmapped and mapped
 * again may come back at another address: always use the latest pointer.
 *
 * Panels start on a page boundary, so the pointer is aligned for any
 * element type. Panels of a read-write store are written through the
 * pointers of memadapt_panel_mut / memadapt_next_panel_mut: those mark
 * the panel changed, and a changed panel is written back to the file
 * (msync) before it is unmapped, at memadapt_flush and at memadapt_close.
 * After memadapt_flush, get the panel with a _mut call again before
 * changing it further (the pointer is the same if it stayed mapped).
 *
 * Threads. A store or writer handle may move between threads but must
 * not be used by two threads at once. memadapt_last_error is per thread.
 * The store measures the RSS of the whole process: open it after
 * allocating the program's other large arrays (they are measured at open
 * as "other memory"), or report changes with memadapt_set_other_memory.
 *
 * Building: `pkg-config --cflags --libs memadapt` after install.sh, or
 * -I<crate>/include and -L<target>/release -lmemadapt. Linking the static
 * library also needs `pkg-config --static --libs memadapt` (-lpthread
 * -ldl -lm ...). C99.
 */
#ifndef MEMADAPT_H
#define MEMADAPT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: every function but the string ones returns one. */
enum memadapt_status {
    MEMADAPT_OK = 0,
    /* A pointer argument was NULL; the message names it. */
    MEMADAPT_E_NULL = -1,
    /* An argument out of its domain: unknown flags or element type, a
     * panel of the wrong length, zero panels, a fixed panel count above P,
     * unpinning a panel not pinned. */
    MEMADAPT_E_INVALID = -2,
    /* The data file does not exist. */
    MEMADAPT_E_NOT_FOUND = -3,
    /* Another input/output error (permissions, ...); the message has the
     * system's reason. */
    MEMADAPT_E_IO = -4,
    /* The disk (or quota) is full: free space and try again. */
    MEMADAPT_E_DISK_FULL = -5,
    /* Not a memadapt data file, another format version, a damaged header,
     * data of the other byte order, or panels aligned for another page
     * size: recreate the file. */
    MEMADAPT_E_FORMAT = -6,
    /* The file is shorter than its header says: recreate or recopy it. */
    MEMADAPT_E_TRUNCATED = -7,
    /* Its writing stopped before memadapt_file_finish: recreate it. */
    MEMADAPT_E_INCOMPLETE = -8,
    /* A panel number >= P. */
    MEMADAPT_E_RANGE = -9,
    /* A _mut call on a store opened MEMADAPT_READ_ONLY. */
    MEMADAPT_E_READ_ONLY = -10,
    /* mmap or munmap failed (address space or map count exhausted). */
    MEMADAPT_E_MAP = -11,
    /* Writing a changed panel back failed: its changes may not be on
     * disk. */
    MEMADAPT_E_WRITE_BACK = -12,
    /* The RSS could not be read from /proc/self/statm. */
    MEMADAPT_E_RSS = -13,
    /* A bug in memadapt; the store concerned can only be closed. */
    MEMADAPT_E_INTERNAL = -14
};

/* memadapt_open flags: one mode, OR one replacement policy (which mapped
 * panel is unmapped first when some must go). */
enum memadapt_flags {
    /* Panels mapped read-only; the file may be on a read-only file
     * system. The default. */
    MEMADAPT_READ_ONLY = 0,
    /* Panels may be changed (memadapt_panel_mut); changes go to the file. */
    MEMADAPT_READ_WRITE = 1,
    /* Most recently used first: optimal for cyclic sweeps, the default. */
    MEMADAPT_POLICY_MRU = 0,
    /* Least recently used first: for programs that revisit recent panels. */
    MEMADAPT_POLICY_LRU = 2,
    /* Lowest memadapt_set_priority first, then most recently used. */
    MEMADAPT_POLICY_PRIORITY = 4,
    /* The paper's algorithm on RSS alone: memory of the program's own
     * that was paged out and is never touched again then leaves RSS
     * below the desired RSS for good, and no more panels are taken after
     * the pressure is gone. By default the library re-measures it once
     * mincore(2) shows every mapped panel resident. For comparisons. */
    MEMADAPT_RSS_ONLY = 8
};

/* What panels hold, recorded in the file (the values are the file's tags). */
enum memadapt_element {
    MEMADAPT_BYTES = 0, /* untyped */
    MEMADAPT_I8 = 1,
    MEMADAPT_U16 = 2,
    MEMADAPT_I16 = 3,
    MEMADAPT_U32 = 4,
    MEMADAPT_I32 = 5,
    MEMADAPT_U64 = 6,
    MEMADAPT_I64 = 7,
    MEMADAPT_F32 = 8, /* float */
    MEMADAPT_F64 = 9  /* double */
};

/* An open store; opaque. */
typedef struct memadapt_store memadapt_store;

/* A data file being written; opaque. */
typedef struct memadapt_writer memadapt_writer;

/* Counters since open, and the state now (memadapt_stats). Used as
 * `struct memadapt_stats`: no typedef, the function has the name, as
 * with POSIX's struct stat and stat(). */
struct memadapt_stats {
    uint64_t accesses;    /* panel accesses (memadapt_panel, ..., memadapt_pin) */
    uint64_t maps;        /* panels mapped */
    uint64_t unmaps;      /* panels unmapped to make room or for a shortage */
    uint64_t write_backs; /* changed panels written back (msync) */
    uint64_t shortages;   /* accesses at which the RSS showed memory taken away */
    uint64_t panels_shed; /* panels given up for shortages */
    uint64_t probes;      /* accesses that kept one panel more */
    uint64_t panels_in;   /* panels the store may keep mapped now */
    uint64_t mapped;      /* panels mapped now (pinned ones may exceed panels_in) */
    uint64_t pinned;      /* panels pinned now */
    uint64_t desired_rss; /* bytes: other memory + panels_in x resident panel size */
    uint64_t rebases;     /* re-measurements of the other memory (RSS steady off dRSS) */
};

/* What a store holds (memadapt_info); `struct memadapt_info`, as above. */
struct memadapt_info {
    uint64_t panels;               /* P */
    uint64_t panel_bytes;          /* bytes of one panel */
    uint64_t resident_panel_bytes; /* what a mapped panel adds to RSS: rounded up to pages */
    uint32_t element;              /* an enum memadapt_element */
    uint32_t flags;                /* the memadapt_flags the store was opened with */
};

/* ---- errors ---- */

/* The message of the last call on this thread that failed: what failed,
 * where (file, panel), what to do. "" if none failed yet. Owned by the
 * library: valid until the next failing memadapt call on this thread. */
const char *memadapt_last_error(void);

/* A short static description of a status code; never NULL. */
const char *memadapt_strerror(int status);

/* The library version, "MAJOR.MINOR.PATCH"; static. */
const char *memadapt_version(void);

/* ---- creating a data file ---- */

/* Creates (replacing any file there) a data file at `path` for `panels`
 * panels of `panel_bytes` bytes each, holding `element` values (an enum
 * memadapt_element; panel_bytes must be a whole number of them), and
 * reserves its disk space, so that a full disk is reported here.
 * *out receives the writer. Any panel size works: panels are padded to
 * the page size in the file. */
int memadapt_file_create(const char *path, uint64_t panel_bytes, size_t panels,
                         int element, memadapt_writer **out);

/* Writes panel `panel` (0 <= panel < panels) from `bytes` bytes at `data`;
 * `bytes` must be the panel size. Panels may be written in any order;
 * panels not written read as zeros. */
int memadapt_file_write_panel(memadapt_writer *writer, size_t panel,
                              const void *data, size_t bytes);

/* Flushes the panels to disk, marks the file complete and frees the
 * writer (also on failure: do not use it afterwards). Until this
 * succeeds, memadapt_open refuses the file as incomplete. */
int memadapt_file_finish(memadapt_writer *writer);

/* Frees the writer without completing the file (for error paths); the
 * file stays, refused by memadapt_open, for the caller to remove().
 * NULL: nothing. */
int memadapt_file_abort(memadapt_writer *writer);

/* ---- opening and closing a store ---- */

/* Opens the data file at `path`. `flags`: MEMADAPT_READ_ONLY or
 * MEMADAPT_READ_WRITE, OR one MEMADAPT_POLICY_*. `fixed_panels`: 0 to
 * adapt to memory pressure (the point of the library); n in 1..P to keep
 * n panels mapped whatever the pressure (a static out-of-core scheme, for
 * comparisons). The program's RSS now is taken as its memory besides the
 * panels. *out receives the store. Missing, truncated, incomplete and
 * wrong-format files are errors naming the file. */
int memadapt_open(const char *path, unsigned int flags, size_t fixed_panels,
                  memadapt_store **out);

/* Writes changed panels back, unmaps every panel (every panel pointer of
 * the store becomes invalid) and frees the store, also on failure. The
 * status reports a failed write-back. NULL: nothing. */
int memadapt_close(memadapt_store *store);

/* ---- panel access: each may unmap other panels (see PANEL POINTER
 * LIFETIME above) ---- */

/* Panel `panel` for reading: *data its address, *len its size in bytes. */
int memadapt_panel(memadapt_store *store, size_t panel, const void **data,
                   size_t *len);

/* Panel `panel` for writing (MEMADAPT_READ_WRITE stores only; else
 * MEMADAPT_E_READ_ONLY): it is written back to the file before it is
 * unmapped, at memadapt_flush and at memadapt_close. */
int memadapt_panel_mut(memadapt_store *store, size_t panel, void **data,
                       size_t *len);

/* The next panel of a cyclic sweep, 0, 1, ..., P-1, 0, ... (the store
 * keeps the cursor), for reading; *index receives its number. The cursor
 * advances even if the access fails. */
int memadapt_next_panel(memadapt_store *store, size_t *index,
                        const void **data, size_t *len);

/* memadapt_next_panel for writing. */
int memadapt_next_panel_mut(memadapt_store *store, size_t *index, void **data,
                            size_t *len);

/* Maps panel `panel` if need be (an access: it may unmap other panels)
 * and keeps it mapped, at the same address, until as many memadapt_unpin
 * calls: it is never unmapped to make room, whatever the policy or the
 * memory pressure. Pins nest. Get its pointer with memadapt_panel. */
int memadapt_pin(memadapt_store *store, size_t panel);

/* memadapt_panel and memadapt_pin in one access: panel `panel` for
 * reading, kept mapped at *data until memadapt_unpin. For callers that
 * pin every panel they hand on (the Python package does, so that a NumPy
 * array never outlives its mapping): one access, not two, so the
 * adaptation sees the program's real access rate. */
int memadapt_pin_panel(memadapt_store *store, size_t panel, const void **data,
                       size_t *len);

/* memadapt_pin_panel for writing (MEMADAPT_READ_WRITE stores only). */
int memadapt_pin_panel_mut(memadapt_store *store, size_t panel, void **data,
                           size_t *len);

/* Releases one pin of `panel` (MEMADAPT_E_INVALID if it holds none). The
 * panel stays mapped, and its pointer valid, until the next access call. */
int memadapt_unpin(memadapt_store *store, size_t panel);

/* ---- tuning ---- */

/* Sets `panel`'s priority for MEMADAPT_POLICY_PRIORITY (0 for all at
 * open): panels of lower priority are unmapped first. */
int memadapt_set_priority(memadapt_store *store, size_t panel,
                          uint32_t priority);

/* Tells the store that the program's memory besides the panels is now
 * `bytes` (it allocated or freed a large array), so that the change is
 * not mistaken for memory pressure or surplus. */
int memadapt_set_other_memory(memadapt_store *store, uint64_t bytes);

/* Sets the RSS noise, in bytes, that the adaptation ignores: a drop must
 * exceed it to count as memory taken away, and an RSS within it of the
 * desired RSS counts as equal (default 256 KiB, at most half a panel).
 * Raise it for a program whose own RSS moves more than that between
 * panel accesses (an interpreter's heap): above it, such movement would
 * stop the store from ever growing, or shed panels for nothing. No
 * effect with fixed_panels. */
int memadapt_set_tolerance(memadapt_store *store, uint64_t bytes);

/* Writes every changed panel back to the file (msync), keeping the
 * panels mapped. */
int memadapt_flush(memadapt_store *store);

/* ---- statistics ---- */

/* Fills *out with the counters and current state. */
int memadapt_stats(memadapt_store *store, struct memadapt_stats *out);

/* Fills *out with P, the panel size, the element type and the flags. */
int memadapt_info(memadapt_store *store, struct memadapt_info *out);

/* Writes the store's timeline to the file `path` (replaced) as CSV, for
 * plotting: a header line, then one line per recorded panel access,
 *     t_s,panel,rss_bytes,drss_bytes,panels_in,mapped,event,drop_bytes,shed_panels
 * with event none, probe, shortage or rebase. At most 8192 lines: a long run is
 * thinned out evenly, accesses with an event are always kept. */
int memadapt_write_timeline_csv(memadapt_store *store, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* MEMADAPT_H */
