"""One LocalCluster of two worker processes for the Dask tests (started once: ~2 s)."""

from __future__ import annotations

import pytest

distributed = pytest.importorskip("distributed", reason="the [dask] extra is not installed")


@pytest.fixture(scope="session")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    with distributed.Client(cluster, timeout=60) as dask_client:
        dask_client.wait_for_workers(2, timeout=60)  # fail, not hang, if they can not start
        yield dask_client
    cluster.close()
