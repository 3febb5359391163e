"""One LocalCluster of two worker processes for the Dask tests (started once: ~2 s)."""

from __future__ import annotations

import pytest

distributed = pytest.importorskip("distributed", reason="the [dask] extra is not installed")


@pytest.fixture(scope="session")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    with distributed.Client(cluster) as dask_client:
        yield dask_client
    cluster.close()
