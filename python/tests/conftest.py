# SPDX-License-Identifier: BSD-3-Clause
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("CCL_TIMEOUT", "20")  # the rendezvous this process serves for the pools

from ranks import Ranks  # noqa: E402

_pools: dict = {}


def pool(n: int, env: dict | None = None) -> Ranks:
    """The session's pool of n ranks (with extra environment `env`), restarted if an earlier
    test killed it."""
    key = (n, tuple(sorted((env or {}).items())))
    p = _pools.get(key)
    if p is None or p.broken:
        p = _pools[key] = Ranks(n, env)
    return p


@pytest.fixture(params=[2, 4], ids=lambda n: "%dranks" % n)
def ranks(request):
    return pool(request.param)


@pytest.fixture
def ranks2():
    return pool(2)


def pytest_sessionfinish(session, exitstatus):
    for p in _pools.values():
        p.close()
