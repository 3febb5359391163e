"""The workers' environment: Dask's workers get this process's sys.path."""

from __future__ import annotations

import importlib.util


def test_no_test_directory_shadows_an_optional_package():
    """A test directory named like an optional package Dask probes (``sparse``) was
    imported as a namespace package by every worker, which then died at its first task."""
    for name in ("sparse", "cupy", "numba", "zarr", "xarray", "h5py", "pandas"):
        spec = importlib.util.find_spec(name)
        assert spec is None or spec.origin is not None, f"{name!r} resolves to {spec}"
