# SPDX-License-Identifier: BSD-3-Clause
"""The Python layer against the C API's contracts: lifetimes of what queued calls use (groups,
host streams), the communicator's lifecycle across threads, C int arguments, exceptions that
cross processes, and the launcher's and preload's edge cases.

Ranks are communicators of this process (cclCommInitAll) driven from one thread: inside one
group, or each on its own host stream. Where an order between threads matters, a stand-in for
libccl (_LibSpy) holds a C call until the test releases it, so nothing depends on timing."""
from __future__ import annotations

import copy
import os
import pickle
import threading
import weakref

import numpy as np
import pytest

import ccl
import ccl.preload
from ccl import _comm, _compression


class _LibSpy:
    """Stands for a module's `lib`: every function is libccl's, except those overridden."""

    def __init__(self, real, **overrides):
        self._real, self._overrides = real, overrides

    def __getattr__(self, name):
        return self._overrides.get(name) or getattr(self._real, name)


def _pair():
    return ccl.Comm.init_all(2)


def _close(comms):
    for c in comms:
        c.destroy()


# ---- exceptions ----


def test_errors_survive_pickling_and_copy():
    """A CclError raised in a worker process reaches its parent (multiprocessing pickles it):
    it must rebuild with its class, code, function and message."""
    with pytest.raises(ccl.CclInvalidArgument) as info:
        ccl.Compression("int8", block=7).error_bound(1.0, 1.0, 1)
    err = info.value
    for twin in (pickle.loads(pickle.dumps(err)), copy.copy(err)):
        assert type(twin) is ccl.CclInvalidArgument
        assert (twin.code, twin.function, twin.message) == (err.code, err.function, err.message)
        assert str(twin) == str(err)


# ---- C int arguments: refused, not wrapped modulo 2**32 ----


def test_split_and_shrink_refuse_ranks_and_colors_a_c_int_cannot_hold():
    """Colors 1 and 2**32 + 1 reached the library as the same color (one communicator where
    the caller asked for two), and excluding rank 2**32 + 1 excluded rank 1."""
    comms = _pair()
    try:
        with pytest.raises(ValueError, match="C int"):
            comms[0].shrink([2**32 + 1])
        with pytest.raises(ValueError, match="C int"):
            comms[0].split(2**32 + 1)
        with pytest.raises(ValueError, match="C int"):
            comms[0].split(0, key=2**31)
    finally:
        _close(comms)


def test_config_and_feedback_refuse_ints_a_c_int_cannot_hold():
    """timeout_ms=2**31 became CCL_CONFIG_UNDEF_INT (the default timeout), 2**32 + 5000 became
    5000 ms; reset_period and quantizations wrapped alike."""
    for timeout_ms in (2**31, 2**32 + 5000):
        with pytest.raises(ValueError, match="C int"):
            ccl.Config(timeout_ms=timeout_ms)._struct()
    with pytest.raises(ValueError, match="C int"):
        ccl.Feedback("loco", 0.5, reset_period=2**32 + 3)
    with pytest.raises(ValueError, match="C int"):
        ccl.codec_error_bound(ccl.Compression("int8"), 1.0, 1.0, 2**32 + 1)
    assert ccl.Config(timeout_ms=2**31 - 1)._struct()[0].timeoutMs == 2**31 - 1


# ---- what queued calls use lives until they have run ----


def test_group_keeps_its_communicators_alive():
    """A communicator dropped inside a group that holds calls of it: its cclCommDestroy would be
    refused (the calls are queued), and it would never be freed."""
    destroyed = []

    def destroy(h):
        code = ccl._lib.lib.cclCommDestroy(h)
        destroyed.append(code)
        return code

    spy = _LibSpy(_comm.lib, cclCommDestroy=destroy)
    xs = [np.full(4, r + 1, np.float32) for r in range(2)]
    orig, _comm.lib = _comm.lib, spy
    try:
        with ccl.group():
            comms = _pair()
            refs = [weakref.ref(c) for c in comms]
            outs = [c.allreduce(x) for c, x in zip(comms, xs)]
            del comms
            assert all(r() is not None for r in refs), "the group must keep its communicators"
            assert destroyed == []
        assert destroyed == [0, 0], "freed once the group has run"
        assert all(r() is None for r in refs)
    finally:
        _comm.lib = orig
    for out in outs:
        np.testing.assert_array_equal(out, [3, 3, 3, 3])


def _feedback_spy():
    freed = []

    def destroy(h):
        freed.append(h)
        return ccl._lib.lib.cclFeedbackDestroy(h)

    return freed, _LibSpy(_compression.lib, cclFeedbackDestroy=destroy)


def test_closing_feedback_leaves_its_state_to_the_queued_call():
    """`with ccl.Feedback() as fb:` around a call on a host stream closed fb while the call was
    still queued: cclFeedbackDestroy freed state the stream then wrote (ASan: heap-use-after-free
    in FeedbackState::prepare)."""
    freed, spy = _feedback_spy()
    comms = _pair()
    streams = [ccl.HostStream(), ccl.HostStream()]
    xs = [np.linspace(-1, 1, 4096, dtype=np.float32) * (r + 1) for r in range(2)]
    orig, _compression.lib = _compression.lib, spy
    try:
        for c, s, x in zip(comms, streams, xs):
            with s, ccl.Feedback("residual") as fb:
                c.allreduce(x, in_place=True, compression="int8", feedback=fb)
            assert fb.closed
        assert freed == [], "closed while queued: freed only once the call has run"
        for s in streams:
            s.synchronize()
        assert len(freed) == 2
    finally:
        _compression.lib = orig
        for s in streams:
            s.destroy()
        _close(comms)
    want = np.linspace(-1, 1, 4096, dtype=np.float32) * 3
    for x in xs:
        np.testing.assert_allclose(x, want, atol=0.1)


def test_closing_feedback_inside_a_group_leaves_its_state_to_the_group():
    freed, spy = _feedback_spy()
    comms = _pair()
    xs = [np.ones(4096, np.float32) * (r + 1) for r in range(2)]
    orig, _compression.lib = _compression.lib, spy
    try:
        with ccl.group():
            for c, x in zip(comms, xs):
                with ccl.Feedback("residual") as fb:
                    c.allreduce(x, in_place=True, compression="int8", feedback=fb)
            assert freed == []
        assert len(freed) == 2
    finally:
        _compression.lib = orig
        _close(comms)
    for x in xs:
        np.testing.assert_allclose(x, 3, atol=0.1)


def test_a_wait_inside_an_open_group_keeps_the_groups_arrays():
    """A group's calls on a host stream are enqueued at cclGroupEnd: a wait on the stream while
    the group is open (here query(); synchronize() or another thread's alike) saw none of them
    and released their arrays, and the stream then read freed memory (ASan)."""
    comms = _pair()
    s = ccl.HostStream()
    try:
        refs = []
        with ccl.group():
            with s:
                outs = []
                for r, c in enumerate(comms):
                    x = np.full(1 << 12, r + 1, np.float32)
                    refs.append(weakref.ref(x))
                    outs.append(c.allreduce(x))
                    del x  # fire and forget: the stream keeps it
            assert s.query()
        assert all(r() is not None for r in refs), "the stream must keep the group's inputs until it ran them"
        s.synchronize()
        assert all(r() is None for r in refs)
        for out in outs:
            np.testing.assert_array_equal(out, 3)
    finally:
        s.destroy()
        _close(comms)


def test_a_stream_dropped_inside_a_group_lives_until_the_group_has_run():
    """`with ccl.HostStream():` inside a group: the stream object went at the end of its block,
    and its finalizer destroyed the stream that cclGroupEnd then enqueued on (ASan:
    heap-use-after-free in enqueueAsync)."""
    comms = _pair()
    xs = [np.full(4, r + 1, np.float32) for r in range(2)]
    try:
        with ccl.group():
            with ccl.HostStream() as s:
                outs = [c.allreduce(x) for c, x in zip(comms, xs)]
            ref = weakref.ref(s)
            del s
            assert ref() is not None, "the group must keep the stream its calls go on"
        # Then nothing refers to the stream: its finalizer's cclHostStreamDestroy has waited for
        # the calls, so their results are in place.
        assert ref() is None
    finally:
        _close(comms)
    for out in outs:
        np.testing.assert_array_equal(out, 3)


def test_destroying_a_stream_inside_a_group_that_uses_it_is_refused():
    comms = _pair()
    s = ccl.HostStream()
    xs = [np.full(4, r + 1, np.float32) for r in range(2)]
    try:
        with ccl.group():
            with s:
                outs = [c.allreduce(x) for c, x in zip(comms, xs)]
            with pytest.raises(ccl.CclInvalidUsage, match="open group"):
                s.destroy()
        s.synchronize()
    finally:
        s.destroy()
        _close(comms)
    for out in outs:
        np.testing.assert_array_equal(out, 3)


def test_reduce_gather_scatter_go_on_the_current_host_stream():
    """They passed stream NULL: inside `with stream:` they blocked, and in a group with calls on
    the stream the group failed ("the operations of one group must all use one stream")."""
    comms = _pair()
    s = ccl.HostStream()
    xs = [np.full(4, r + 1, np.float32) for r in range(2)]
    try:
        with s, ccl.group():
            summed = [c.allreduce(x) for c, x in zip(comms, xs)]
            reduced = [c.reduce(x, root=0) for c, x in zip(comms, xs)]
            gathered = [c.gather(x, root=1) for c, x in zip(comms, xs)]
            scattered = [c.scatter(np.arange(4, dtype=np.float32) if r == 0 else None, root=0,
                                   out=np.zeros(2, np.float32)) for r, c in enumerate(comms)]
        s.synchronize()
    finally:
        s.destroy()
        _close(comms)
    np.testing.assert_array_equal(summed[1], 3)
    np.testing.assert_array_equal(reduced[0], 3)
    assert reduced[1] is None and gathered[0] is None
    np.testing.assert_array_equal(gathered[1], [[1] * 4, [2] * 4])
    np.testing.assert_array_equal(scattered[0], [0, 1])
    np.testing.assert_array_equal(scattered[1], [2, 3])


# ---- lifecycle across threads ----


def test_abort_during_destroy_does_not_free_twice():
    """abort() from a watchdog while destroy() is inside cclCommDestroy (which waits for calls
    queued on host streams) called cclCommAbort on the same handle: the communicator was freed
    twice (ASan: heap-use-after-free in cclCommAbort's drainAsync)."""
    comms = _pair()
    inside, release = threading.Event(), threading.Event()
    aborted = []

    def destroy(h):
        inside.set()
        release.wait()
        return ccl._lib.lib.cclCommDestroy(h)

    def abort(h):
        aborted.append(h)  # the real call here would free it a second time
        return 0

    orig, _comm.lib = _comm.lib, _LibSpy(_comm.lib, cclCommDestroy=destroy, cclCommAbort=abort)
    errors = []

    def destroyer():
        try:
            comms[0].destroy()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=destroyer)
    try:
        t.start()
        inside.wait()
        comms[0].abort()
        release.set()
        t.join()
    finally:
        release.set()
        _comm.lib = orig
    comms[1].destroy()
    assert errors == []
    assert aborted == [], "cclCommAbort on a communicator that cclCommDestroy is freeing"
    assert comms[0].closed


def test_destroy_waits_for_a_revoke_in_progress():
    """revoke() was not counted as a call: destroy() from another thread could free the
    communicator while cclCommRevoke still read it."""
    comms = _pair()
    inside, release = threading.Event(), threading.Event()
    events = []

    def revoke(h, flags):
        events.append("revoke")
        inside.set()
        release.wait()
        code = ccl._lib.lib.cclCommRevoke(h, flags)
        events.append("revoked")
        return code

    def destroy(h):
        events.append("destroy")
        return ccl._lib.lib.cclCommDestroy(h)

    orig, _comm.lib = _comm.lib, _LibSpy(_comm.lib, cclCommRevoke=revoke, cclCommDestroy=destroy)
    revoker = threading.Thread(target=comms[0].revoke)
    destroyer = threading.Thread(target=comms[0].destroy)
    try:
        revoker.start()
        inside.wait()
        with comms[0]._cv:
            inflight = comms[0]._inflight
        assert inflight == 1, "a revoke in progress must count as a call destroy() waits for"
        destroyer.start()
        with comms[0]._cv:
            while not comms[0]._closing:
                comms[0]._cv.wait()
        assert "destroy" not in events  # waiting for the revoke
    finally:
        release.set()
        revoker.join()
        if destroyer.ident is not None:  # started
            destroyer.join()
        _comm.lib = orig
    comms[1].destroy()
    assert events == ["revoke", "revoked", "destroy"]
    assert comms[0].closed


# ---- launcher and preload ----


def test_init_from_env_removes_the_id_file_when_init_fails(tmp_path):
    """Rank 0 left the id file behind when its own init failed: the next job's ranks would read
    that dead id before rank 0 wrote theirs."""
    path = tmp_path / "uid"
    env = {"RANK": "0", "WORLD_SIZE": "1", "CCL_UNIQUE_ID_FILE": str(path)}
    with pytest.raises(ccl.CclInvalidArgument):
        ccl.init_from_env(ccl.Config(host_id="\x01bad"), env=env)  # refused by the library at init
    assert not path.exists()


def test_preload_looks_in_every_package_folder(tmp_path, monkeypatch):
    """An editable install has two package folders: the source one (Python files) and the
    installed one (lib/, where the face is). libccl was found there; the face was not."""
    source, installed = tmp_path / "source", tmp_path / "installed"
    source.mkdir()
    (installed / "lib").mkdir(parents=True)
    face = installed / "lib" / "libccl_nccl.so.0"
    face.write_bytes(b"")
    monkeypatch.setattr(ccl, "__path__", [str(source), str(installed)])
    assert ccl.preload.library_path() == str(face)
