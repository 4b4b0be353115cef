"""`make test` runs the suite on pytest-xdist workers with `--dist loadgroup`: every test's unit
of distribution is its file, or its package where the package shares servers (tests/scheduler,
tests/dashboard: one Airflow each), as tests/conftest.py's `pytest_collection_modifyitems` marks
it. pytest-xdist carries the group in the test's node id (`...@<group>`); when it cannot (pytest
9.2 with pytest-xdist 3.8, pytest-dev/pytest-xdist#1386), every test is distributed alone and
every worker starts each shared Airflow, silently."""

from __future__ import annotations

import pytest


def test_each_test_is_distributed_with_its_group(request: pytest.FixtureRequest) -> None:
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("only on a pytest-xdist worker under --dist loadgroup (make test)")
    assert request.node.nodeid.endswith("@tests/test_distribution.py"), request.node.nodeid
