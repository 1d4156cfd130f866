# SPDX-License-Identifier: BSD-3-Clause
"""What PyTorch's own test suites found in cclz, each a test that failed before its fix, and
the public behaviours of PyTorch's gloo process-group tests on cclz (c10d_suite_worker.py;
the suite itself runs from torch_suite/run.py)."""
import pytest

from test_c10d import extension, launch  # noqa: F401  (the fixture compiles the backend once)

pytest.importorskip("torch")


def suite(case, nranks=2, **env):
    return launch(case, nranks, worker="c10d_suite_worker.py", **env)


@pytest.mark.parametrize("nranks", [2, 3])
def test_all_gather_coalesced_reads_outputs_by_rank_then_input(nranks):
    suite("coalesced_gather_layout", nranks)


def test_outputs_made_in_inference_mode_are_written():
    suite("inference_mode")


def test_debug_detail_wrapper_gets_sequence_numbers():
    suite("debug_detail", TORCH_DISTRIBUTED_DEBUG="DETAIL")


def test_recv_from_any_source_is_refused_with_a_message():
    suite("recv_any_source")


@pytest.mark.parametrize("nranks", [2, 3])
def test_reduce_scatter_of_uneven_parts_matches_gloo(nranks):
    suite("uneven_reduce_scatter", nranks)


def test_root_tensor_other_than_the_first_is_refused():
    suite("root_tensor")


@pytest.mark.parametrize("nranks", [2, 3])
def test_gloo_process_group_behaviours(nranks):
    suite("gloo_behaviours", nranks)


def test_gloo_process_group_argument_checks():
    suite("gloo_checks")
