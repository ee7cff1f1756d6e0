"""memadapt for Python: keep as much of a data set in memory as the machine
can spare, and no more (paper 002).

The data set is a file of P equal panels. A store opened on it hands out
panels as NumPy arrays over the memory-mapped file, without copying, and
decides from the program's own RSS how many panels stay mapped::

    import memadapt
    memadapt.create("A.panels", [a0, a1, a2, a3])     # once, from arrays
    with memadapt.open("A.panels") as store:          # after allocating x, y
        for _ in range(iterations):
            for i, panel in store.sweep():            # panels 0 .. P-1
                y[rows[i]] = panel.reshape(k, n) @ x

A panel array is pinned (never unmapped) while it, or any view of it,
is alive: it can never point at memory that is gone. Keep panel arrays
only as long as needed (the loop above drops each at the next
iteration): a panel kept alive is a panel the library cannot give back
when memory is short.

This is a ctypes binding of the C library (libmemadapt.so, see
include/memadapt.h); it is found at $MEMADAPT_LIB, else in this package
(the wheel bundles it), else in the workspace's target/release or
target/debug, else by the system's loader.
Errors from the library raise MemadaptError (or a subclass) with the
library's message: what failed, on which file and panel, what to do.
"""

import ctypes
import ctypes.util
import os
import threading
import weakref
from pathlib import Path

import numpy as np

__all__ = [
    "MemadaptError",
    "NotFoundError",
    "FormatError",
    "TruncatedError",
    "IncompleteError",
    "DiskFullError",
    "ReadOnlyError",
    "Store",
    "Writer",
    "create",
    "open",
    "library_path",
    "version",
]

_OK = 0


class MemadaptError(Exception):
    """A failed memadapt call; `status` is the C status code (< 0)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class NotFoundError(MemadaptError, FileNotFoundError):
    """The data file does not exist."""


class DiskFullError(MemadaptError, OSError):
    """The disk or quota is full while writing or reserving panels."""


class FormatError(MemadaptError, ValueError):
    """Not a memadapt data file (or another version, byte order, page size)."""


class TruncatedError(MemadaptError, ValueError):
    """The file is shorter than its header says."""


class IncompleteError(MemadaptError, ValueError):
    """The file's writing stopped before it was finished."""


class ReadOnlyError(MemadaptError):
    """A write access to a store opened read-only."""


_ERRORS = {
    -3: NotFoundError,
    -5: DiskFullError,
    -6: FormatError,
    -7: TruncatedError,
    -8: IncompleteError,
    -10: ReadOnlyError,
}

# enum memadapt_element tag -> NumPy dtype (the header's order).
_DTYPES = {
    0: np.dtype(np.uint8),
    1: np.dtype(np.int8),
    2: np.dtype(np.uint16),
    3: np.dtype(np.int16),
    4: np.dtype(np.uint32),
    5: np.dtype(np.int32),
    6: np.dtype(np.uint64),
    7: np.dtype(np.int64),
    8: np.dtype(np.float32),
    9: np.dtype(np.float64),
}
_TAGS = {v: k for k, v in _DTYPES.items()}

_READ_WRITE = 1
_RSS_ONLY = 8
_POLICIES = {"mru": 0, "lru": 2, "priority": 4}


class _Stats(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "accesses",
            "maps",
            "unmaps",
            "write_backs",
            "shortages",
            "panels_shed",
            "probes",
            "panels_in",
            "mapped",
            "pinned",
            "desired_rss",
            "rebases",
        )
    ]


class _Info(ctypes.Structure):
    _fields_ = [
        ("panels", ctypes.c_uint64),
        ("panel_bytes", ctypes.c_uint64),
        ("resident_panel_bytes", ctypes.c_uint64),
        ("element", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
    ]


def _candidates():
    env = os.environ.get("MEMADAPT_LIB")
    if env:
        yield Path(env)
        return
    # Installed from the wheel: the library beside this file (its name
    # carries the interpreter's extension suffix).
    here = Path(__file__).resolve().parent
    yield from sorted(here.glob("libmemadapt*.so"))
    # Running from the workspace: crates/memadapt/python/memadapt/ is
    # four levels below the root, whose target/ cargo fills.
    root = here.parents[3]
    for profile in ("release", "debug"):
        yield root / "target" / profile / "libmemadapt.so"
    found = ctypes.util.find_library("memadapt")
    if found:
        yield Path(found)
    yield Path("libmemadapt.so")  # LD_LIBRARY_PATH, ld.so.cache


def _load():
    tried = []
    for path in _candidates():
        if path.is_absolute() and not path.exists():
            tried.append(str(path))
            continue
        try:
            return ctypes.CDLL(str(path)), str(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError(
        "memadapt: libmemadapt.so not found (tried: "
        + "; ".join(tried)
        + "). Build it (`cargo build --release -p memadapt`), install it "
        "(crates/memadapt/install.sh PREFIX, then LD_LIBRARY_PATH=PREFIX/lib), "
        "or set MEMADAPT_LIB to its path"
    )


_lib, _lib_path = _load()


def _proto(name, *args):
    f = getattr(_lib, name)
    f.argtypes = list(args)
    f.restype = ctypes.c_int
    return f


_P = ctypes.c_void_p
_SZ = ctypes.c_size_t
_PP = ctypes.POINTER(ctypes.c_void_p)
_PSZ = ctypes.POINTER(ctypes.c_size_t)

_lib.memadapt_last_error.argtypes = []
_lib.memadapt_last_error.restype = ctypes.c_char_p
_lib.memadapt_version.argtypes = []
_lib.memadapt_version.restype = ctypes.c_char_p
_file_create = _proto(
    "memadapt_file_create", ctypes.c_char_p, ctypes.c_uint64, _SZ, ctypes.c_int, _PP
)
_file_write_panel = _proto("memadapt_file_write_panel", _P, _SZ, _P, _SZ)
_file_finish = _proto("memadapt_file_finish", _P)
_file_abort = _proto("memadapt_file_abort", _P)
_open = _proto("memadapt_open", ctypes.c_char_p, ctypes.c_uint, _SZ, _PP)
_close = _proto("memadapt_close", _P)
_pin_panel = _proto("memadapt_pin_panel", _P, _SZ, _PP, _PSZ)
_pin_panel_mut = _proto("memadapt_pin_panel_mut", _P, _SZ, _PP, _PSZ)
_unpin = _proto("memadapt_unpin", _P, _SZ)
_set_priority = _proto("memadapt_set_priority", _P, _SZ, ctypes.c_uint32)
_set_other_memory = _proto("memadapt_set_other_memory", _P, ctypes.c_uint64)
_set_tolerance = _proto("memadapt_set_tolerance", _P, ctypes.c_uint64)
_flush = _proto("memadapt_flush", _P)
_stats = _proto("memadapt_stats", _P, ctypes.POINTER(_Stats))
_info = _proto("memadapt_info", _P, ctypes.POINTER(_Info))
_timeline = _proto("memadapt_write_timeline_csv", _P, ctypes.c_char_p)


def _check(status):
    if status != _OK:
        message = (_lib.memadapt_last_error() or b"").decode("utf-8", "replace")
        raise _ERRORS.get(status, MemadaptError)(status, message)


def _path(path):
    return os.fsencode(path)


def library_path():
    """The libmemadapt.so this package uses."""
    return _lib_path


def version():
    """The C library's version, "MAJOR.MINOR.PATCH"."""
    return _lib.memadapt_version().decode()


class Writer:
    """A data file being written: `Writer(path, panel_shape, panels, dtype)`,
    then `write(i, array)` for each panel and `finish()`. As a context
    manager it finishes on success and aborts (leaving a file that open
    refuses) on an exception."""

    def __init__(self, path, panel_shape, panels, dtype=np.float64):
        self.dtype = np.dtype(dtype)
        if self.dtype not in _TAGS:
            raise TypeError(
                f"memadapt: panels of {self.dtype} cannot be stored; use one of "
                + ", ".join(str(d) for d in _DTYPES.values())
            )
        self.panel_shape = tuple(np.atleast_1d(panel_shape).tolist())
        self.panel_bytes = int(np.prod(self.panel_shape)) * self.dtype.itemsize
        self.panels = int(panels)
        self.path = path
        handle = ctypes.c_void_p()
        _check(
            _file_create(
                _path(path), self.panel_bytes, self.panels, _TAGS[self.dtype], ctypes.byref(handle)
            )
        )
        self._w = handle

    def write(self, panel, array):
        """Writes panel `panel` from `array` (converted to the file's dtype,
        of panel_shape elements)."""
        a = np.ascontiguousarray(array, dtype=self.dtype)
        if a.nbytes != self.panel_bytes:
            raise ValueError(
                f"memadapt: panel {panel} of {self.path} has {a.size} elements, "
                f"the file's panels have {self.panel_bytes // self.dtype.itemsize}"
            )
        _check(_file_write_panel(self._live(), panel, a.ctypes.data, a.nbytes))

    def finish(self):
        """Flushes to disk and marks the file complete."""
        w, self._w = self._live(), None
        _check(_file_finish(w))

    def abort(self):
        if self._w is not None:
            w, self._w = self._w, None
            _check(_file_abort(w))

    def _live(self):
        if self._w is None:
            raise MemadaptError(-2, f"memadapt: the writer of {self.path} is finished or aborted")
        return self._w

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is None:
            self.finish()
        else:
            self.abort()

    def __del__(self):
        if getattr(self, "_w", None) is not None:
            _file_abort(self._w)


def create(path, panels, dtype=None):
    """Creates the data file `path` from `panels`, a sequence of arrays of
    one shape (and dtype: the first's, or `dtype`)."""
    panels = list(panels)
    if not panels:
        raise ValueError(f"memadapt: no panels to write to {path}")
    first = np.asarray(panels[0])
    with Writer(path, first.shape, len(panels), dtype or first.dtype) as w:
        for i, p in enumerate(panels):
            w.write(i, p)


class _Handle:
    """Owns the C store. Panel arrays hold it (through their finalizers),
    so that a closed Store is really closed, unmapping everything, only
    when no panel array is left."""

    def __init__(self, ptr, path):
        self.ptr = ptr
        self.path = path
        self.lock = threading.RLock()
        self.pins = 0
        self.closing = False

    def unpin(self, panel):
        with self.lock:
            if self.ptr is None:
                return
            _unpin(self.ptr, panel)  # cannot fail: the pin was taken
            self.pins -= 1
            if self.closing and self.pins == 0:
                self.close()

    def close(self):
        with self.lock:
            ptr, self.ptr = self.ptr, None
            if ptr is not None:
                _check(_close(ptr))

    def __del__(self):
        if getattr(self, "ptr", None) is not None:
            _close(self.ptr)


# The interpreter's own RSS moves between panel accesses by more than the
# C library's default tolerance (256 KiB): pymalloc takes memory in 1 MiB
# arenas, touched as they fill. So 1 MiB, at most half a panel.
PYTHON_TOLERANCE = 1 << 20


def open(path, mode="r", policy="mru", fixed=0, tolerance=None, rss_only=False):  # noqa: A001
    """Opens the data file `path`: mode "r" (read-only, default) or "r+"
    (panels writable, written back to the file); policy "mru" (cyclic
    sweeps), "lru" or "priority"; `fixed` > 0 keeps that many panels
    mapped whatever the pressure (0: adapt); `tolerance`: RSS noise in
    bytes (default PYTHON_TOLERANCE, at most half a panel). Allocate and
    touch the program's other large arrays first (np.ones, not np.zeros,
    whose pages are not resident until written): the RSS at open is taken
    as memory besides the panels (or see Store.set_other_memory); and
    keep the loop from allocating (out= arguments), or the heap's growth
    reads as memory the panels cannot have. `rss_only`: the paper's
    algorithm on RSS alone, without the mincore check that lets the
    library re-measure memory of the program's own paged out for good
    (for comparisons)."""
    return Store(path, mode, policy, fixed, tolerance, rss_only)


class Store:
    """An open data file whose panels come as zero-copy NumPy arrays."""

    def __init__(self, path, mode="r", policy="mru", fixed=0, tolerance=None, rss_only=False):
        if mode not in ("r", "r+"):
            raise ValueError(f"memadapt: mode must be 'r' or 'r+', got {mode!r}")
        if policy not in _POLICIES:
            raise ValueError(f"memadapt: policy must be one of {sorted(_POLICIES)}, got {policy!r}")
        flags = _POLICIES[policy] | (_READ_WRITE if mode == "r+" else 0)
        flags |= _RSS_ONLY if rss_only else 0
        ptr = ctypes.c_void_p()
        _check(_open(_path(path), flags, int(fixed), ctypes.byref(ptr)))
        self._h = _Handle(ptr.value, path)
        self.path = path
        self.writable = mode == "r+"
        info = _Info()
        _check(_info(self._h.ptr, ctypes.byref(info)))
        self.panels = int(info.panels)
        self.panel_bytes = int(info.panel_bytes)
        self.dtype = _DTYPES[info.element]
        self.rss_only = bool(info.flags & _RSS_ONLY)
        self._cursor = 0
        if tolerance is None:
            tolerance = min(PYTHON_TOLERANCE, int(info.resident_panel_bytes) // 2)
        self.set_tolerance(tolerance)

    def __len__(self):
        return self.panels

    def _live(self):
        h = self._h
        if h is None or h.ptr is None:
            raise MemadaptError(-2, f"memadapt: the store of {self.path} is closed")
        return h

    def _get(self, panel, write):
        if not 0 <= panel < self.panels:
            raise IndexError(f"memadapt: panel {panel} of {self.path}: it has {self.panels} panels")
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        h = self._live()
        with h.lock:
            fn = _pin_panel_mut if write else _pin_panel
            _check(fn(h.ptr, panel, ctypes.byref(data), ctypes.byref(size)))
            h.pins += 1
        buf = (ctypes.c_char * size.value).from_address(data.value)
        # The pin goes when the buffer does, that is when the last array
        # or memoryview over it does: no array outlives its mapping.
        weakref.finalize(buf, h.unpin, panel)
        view = memoryview(buf).cast("B")
        if not write:
            # Read-only mappings: a write would be a segmentation fault,
            # so the array refuses it (and refuses being made writable).
            view = view.toreadonly()
        return np.frombuffer(view, dtype=self.dtype)

    def panel(self, i):
        """Panel `i` as a read-only 1-D array over the mapped file."""
        return self._get(i, False)

    def panel_mut(self, i):
        """Panel `i` as a writable array ("r+" stores): changes go to the
        file (written back before the panel is unmapped, at flush and at
        close)."""
        return self._get(i, True)

    def next_panel(self, write=False):
        """(i, array) for the next panel of a cyclic sweep 0, 1, ..., P-1, 0, ..."""
        i = self._cursor
        self._cursor = (i + 1) % self.panels
        return i, self._get(i, write)

    def sweep(self, write=False):
        """One pass over all panels in order: yields (i, array)."""
        for _ in range(self.panels):
            i, a = self.next_panel(write)
            yield i, a
            # Drop the generator's reference before the next access so
            # that only the caller's loop variable can still pin it.
            del a

    def set_priority(self, panel, priority):
        """Panel's priority for policy "priority": lower is unmapped first."""
        h = self._live()
        with h.lock:
            _check(_set_priority(h.ptr, panel, priority))

    def set_other_memory(self, nbytes):
        """The program's memory besides panels is now `nbytes` (after
        allocating or freeing a large array)."""
        h = self._live()
        with h.lock:
            _check(_set_other_memory(h.ptr, int(nbytes)))

    def set_tolerance(self, nbytes):
        """RSS movement, in bytes, that is noise rather than pressure."""
        h = self._live()
        with h.lock:
            _check(_set_tolerance(h.ptr, int(nbytes)))

    def flush(self):
        """Writes changed panels back to the file, keeping them mapped."""
        h = self._live()
        with h.lock:
            _check(_flush(h.ptr))

    def stats(self):
        """Counters since open and the state now, as a dict."""
        s = _Stats()
        h = self._live()
        with h.lock:
            _check(_stats(h.ptr, ctypes.byref(s)))
        return {name: int(getattr(s, name)) for name, _ in _Stats._fields_}

    def write_timeline_csv(self, path):
        """The timeline (t_s, panel, rss_bytes, drss_bytes, panels_in,
        mapped, event, ...) as CSV, for plotting."""
        h = self._live()
        with h.lock:
            _check(_timeline(h.ptr, _path(path)))

    def close(self):
        """Writes changed panels back and closes the store. Panel arrays
        still alive stay valid: the panels are unmapped when the last goes."""
        h, self._h = self._h, None
        if h is None:
            return
        with h.lock:
            if h.pins == 0:
                h.close()
            else:
                if h.ptr is not None:
                    _check(_flush(h.ptr))
                h.closing = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self._h is None else ("r+" if self.writable else "r")
        return f"<memadapt.Store {self.path!r} {self.panels} x {self.panel_bytes} B {self.dtype} {state}>"
