"""The Python package against the real library, files and mappings
(run by crates/memadapt/tests/python.rs, or `pytest` with MEMADAPT_LIB
set or the library built in the workspace)."""

import gc
import os

import numpy as np
import pytest

import memadapt


def panels(p=4, n=1000, dtype=np.float64):
    # 1000 doubles: 8000 bytes, not a multiple of the page size.
    return [np.arange(n, dtype=dtype) * (i + 1) + i for i in range(p)]


def test_create_open_read_round_trip(tmp_path):
    path = tmp_path / "a.panels"
    src = panels()
    memadapt.create(path, src)
    with memadapt.open(path) as s:
        assert (s.panels, s.panel_bytes, s.dtype) == (4, 8000, np.dtype(np.float64))
        for _ in range(2):
            seen = []
            for i, a in s.sweep():
                np.testing.assert_array_equal(a, src[i])
                seen.append(i)
            assert seen == [0, 1, 2, 3]
        st = s.stats()
        assert st["accesses"] == 8, "one access per panel, pinning included"
        assert st["mapped"] >= 1


def test_panels_are_zero_copy_and_read_only(tmp_path):
    path = tmp_path / "a.panels"
    memadapt.create(path, panels())
    with memadapt.open(path) as s:
        a = s.panel(2)
        b = s.panel(2)
        assert a.ctypes.data == b.ctypes.data, "both views of the one mapping"
        assert a.ctypes.data % os.sysconf("SC_PAGE_SIZE") == 0
        assert not a.flags.writeable
        with pytest.raises(ValueError):
            a[0] = 1.0
        with pytest.raises(ValueError):
            a.flags.writeable = True
        with pytest.raises(memadapt.ReadOnlyError, match="read-only"):
            s.panel_mut(0)


def test_write_back_survives_eviction_and_reopen(tmp_path):
    path = tmp_path / "w.panels"
    src = panels(p=6)
    memadapt.create(path, src)
    # One panel mapped at a time: each write is evicted by the next access.
    with memadapt.open(path, "r+", fixed=1) as s:
        for i, a in s.sweep(write=True):
            a *= -1.0
            del a
        assert s.stats()["write_backs"] >= 5
        np.testing.assert_array_equal(s.panel(0), -src[0])
    with memadapt.open(path) as s:
        for i, a in s.sweep():
            np.testing.assert_array_equal(a, -src[i])


def test_a_live_array_pins_its_panel(tmp_path):
    path = tmp_path / "p.panels"
    src = panels(p=5)
    memadapt.create(path, src)
    s = memadapt.open(path, fixed=1)
    kept = s.panel(0)[10:20]  # a view keeps the pin too
    for _ in range(3):
        for i, a in s.sweep():
            np.testing.assert_array_equal(a, src[i])
    assert s.stats()["pinned"] >= 1
    np.testing.assert_array_equal(kept, src[0][10:20])
    # close with a live array: still valid, unmapped when it goes
    s.close()
    np.testing.assert_array_equal(kept, src[0][10:20])
    del kept
    gc.collect()
    with pytest.raises(memadapt.MemadaptError, match="closed"):
        s.panel(0)


def test_unpinned_when_arrays_go(tmp_path):
    path = tmp_path / "u.panels"
    memadapt.create(path, panels(p=3))
    with memadapt.open(path) as s:
        a = s.panel(1)
        assert s.stats()["pinned"] == 1
        del a
        gc.collect()
        assert s.stats()["pinned"] == 0


def test_missing_file_raises_with_the_path(tmp_path):
    missing = tmp_path / "nope.panels"
    with pytest.raises(memadapt.NotFoundError, match="nope.panels") as e:
        memadapt.open(missing)
    assert isinstance(e.value, FileNotFoundError)
    assert e.value.status == -3


def test_bad_files_raise(tmp_path):
    junk = tmp_path / "junk.panels"
    junk.write_bytes(b"this is not a memadapt file" * 10)
    with pytest.raises(memadapt.FormatError, match="junk.panels"):
        memadapt.open(junk)

    short = tmp_path / "short.panels"
    memadapt.create(short, panels())
    os.truncate(short, os.path.getsize(short) - 100)
    with pytest.raises(memadapt.TruncatedError, match="short.panels"):
        memadapt.open(short)

    unfinished = tmp_path / "unfinished.panels"
    w = memadapt.Writer(unfinished, 1000, 2)
    w.write(0, np.zeros(1000))
    w.abort()
    with pytest.raises(memadapt.IncompleteError, match="unfinished.panels"):
        memadapt.open(unfinished)


def test_bad_arguments_raise(tmp_path):
    path = tmp_path / "a.panels"
    memadapt.create(path, panels())
    with memadapt.open(path) as s:
        with pytest.raises(IndexError):
            s.panel(4)
    with pytest.raises(ValueError, match="elements"):
        with memadapt.Writer(tmp_path / "b.panels", 10, 2) as w:
            w.write(0, np.zeros(11))
    with pytest.raises(memadapt.IncompleteError):
        memadapt.open(tmp_path / "b.panels")
    with pytest.raises(TypeError):
        memadapt.Writer(tmp_path / "c.panels", 10, 2, dtype=np.complex128)
    with pytest.raises(memadapt.MemadaptError):
        memadapt.open(path, fixed=9)


def test_timeline_csv(tmp_path):
    path = tmp_path / "t.panels"
    memadapt.create(path, panels(dtype=np.float32))
    with memadapt.open(path) as s:
        assert s.dtype == np.float32
        for _ in s.sweep():
            pass
        s.write_timeline_csv(tmp_path / "t.csv")
    lines = (tmp_path / "t.csv").read_text().splitlines()
    assert lines[0].startswith("t_s,panel,rss_bytes")
    assert len(lines) == 5


def test_tuning_calls(tmp_path):
    path = tmp_path / "k.panels"
    memadapt.create(path, panels())
    s = memadapt.open(path, policy="priority")
    s.set_tolerance(0)
    s.set_priority(3, 7)
    s.set_other_memory(1 << 20)
    assert s.stats()["desired_rss"] >= 1 << 20
    s.close()
    with pytest.raises(memadapt.MemadaptError, match="closed"):
        s.set_tolerance(1)


def test_rss_only_store_reads_the_same_and_says_so(tmp_path):
    path = tmp_path / "r.panels"
    src = panels()
    memadapt.create(path, src)
    with memadapt.open(path) as s:
        assert not s.rss_only
    with memadapt.open(path, rss_only=True) as s:
        assert s.rss_only, "the library read the flag back"
        for _ in range(3):
            for i, a in s.sweep():
                np.testing.assert_array_equal(a, src[i])
