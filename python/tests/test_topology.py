# SPDX-License-Identifier: BSD-3-Clause
"""The nodes of a communicator (cclCommTopology): Comm.node, nnodes, local_rank and
local_size, from the host identity each rank gives (Config.host_id, else CCL_HOST_ID or the
host's own), kept through splits."""
import threading

import numpy as np
import pytest

import ccl


def _threads(host_ids, make, errors=None):
    """Runs make(rank) for every rank on its own thread (a Comm's constructor returns once all
    ranks joined) and returns the results by rank. What ranks raise fails the test, unless
    `errors` (a list) is given to collect it."""
    out, raised = [None] * len(host_ids), [] if errors is None else errors

    def run(r):
        try:
            out[r] = make(r)
        except Exception as e:  # noqa: BLE001
            raised.append(e)

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(len(host_ids))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a rank did not finish"
    assert errors is not None or not raised, raised
    return out


def _places(comms):
    return [(c.node, c.nnodes, c.local_rank, c.local_size) for c in comms]


def test_nodes_from_config_host_ids_and_through_split():
    host_ids = ["b", "a", "b", "b"]  # unequal: node 0 ("b") holds ranks 0, 2, 3
    uid = ccl.get_unique_id()
    comms = _threads(host_ids, lambda r: ccl.Comm(4, uid, r, ccl.Config(host_id=host_ids[r])))
    try:
        assert _places(comms) == [(0, 2, 0, 3), (1, 2, 0, 1), (0, 2, 1, 3), (0, 2, 2, 3)]
        # {0, 1} has a rank of each node, {2, 3} is one node.
        subs = _threads(host_ids, lambda r: comms[r].split(r // 2))
        try:
            assert _places(subs) == [(0, 2, 0, 1), (1, 2, 0, 1), (0, 1, 0, 2), (0, 1, 1, 2)]
            sums = _threads(host_ids, lambda r: subs[r].allreduce(np.ones(3, np.int32)))
            for s in sums:
                np.testing.assert_array_equal(s, [2, 2, 2])
        finally:
            for s in subs:
                s.destroy()
        # A split's config may repeat the parent's host identity, not change it.
        same = _threads(host_ids, lambda r: comms[r].split(0, config={"host_id": host_ids[r]}))
        assert _places(same) == _places(comms)
        for s in same:
            s.destroy()
        refused = []
        _threads(host_ids, lambda r: comms[r].split(0, config=ccl.Config(host_id="elsewhere")), refused)
        assert len(refused) == 4 and all(isinstance(e, ccl.CclInvalidArgument) for e in refused), refused
        assert "hostId" in str(refused[0])
    finally:
        for c in comms:
            c.destroy()


def _one_node(comm):
    # Processes of one machine with neither CCL_HOST_ID nor host_id: the host's own identity.
    assert (comm.node, comm.nnodes, comm.local_rank, comm.local_size) == (0, 1, comm.rank, comm.size)


def test_processes_of_one_host_are_one_node(ranks):
    ranks.run(_one_node)


@pytest.mark.parametrize("bad, why", [("", "empty"), ("x" * 256, "256 characters"),
                                      ("a\nb", "control character")])
def test_bad_host_ids_are_refused(bad, why):
    with pytest.raises(ccl.CclInvalidArgument, match=why):
        ccl.Comm(1, ccl.get_unique_id(), 0, ccl.Config(host_id=bad))


def test_host_id_type_is_checked():
    with pytest.raises(TypeError, match="host_id"):
        ccl.Comm(1, ccl.get_unique_id(), 0, {"host_id": 5})
    with pytest.raises(ValueError, match="NUL"):
        ccl.Comm(1, ccl.get_unique_id(), 0, {"host_id": "a\0b"})


def test_intra_compression_is_accepted():
    with ccl.Comm(1, ccl.get_unique_id(), 0, ccl.Config(host_id="n" * 255, intra_compression="int8")) as c:
        assert (c.node, c.nnodes, c.local_rank, c.local_size) == (0, 1, 0, 1)
