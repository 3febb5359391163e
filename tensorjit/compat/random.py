"""Theano's random stream classes with Theano's argument orders.

``shared_randomstreams.RandomStreams`` and ``rng_mrg.MRG_RandomStreams`` take an
``ndim`` argument before ``dtype`` (checked against ``size`` where both are given), and
``MRG_RandomStreams.binomial`` takes ``(size, p, n)`` where tensorjit takes
``(size, n, p)``.
"""

from __future__ import annotations

from typing import Any

from tensorjit.tensor.random import MRG_RandomStreams as _MRG
from tensorjit.tensor.random import RandomStreams as _RS

__all__ = ["MRG_RandomStreams", "RandomStreams"]


def _check_ndim(what: str, size: Any, ndim: int | None) -> None:
    if ndim is not None and isinstance(size, (tuple, list)) and len(size) != ndim:
        raise ValueError(f"{what}: ndim={ndim} does not match size={size!r}")


class _Unsupported:
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"{self._theano_name}.{name} is not supported by tensorjit yet")


class RandomStreams(_Unsupported, _RS):
    """``theano.tensor.shared_randomstreams.RandomStreams``."""

    _theano_name = "theano.tensor.shared_randomstreams.RandomStreams"

    def uniform(self, size=None, low=0.0, high=1.0, ndim=None, dtype=None):
        _check_ndim("uniform", size, ndim)
        return super().uniform(size, low, high, dtype=dtype)

    def normal(self, size=None, avg=0.0, std=1.0, ndim=None, dtype=None):
        _check_ndim("normal", size, ndim)
        return super().normal(size, avg, std, dtype=dtype)

    def binomial(self, size=None, n=1, p=0.5, ndim=None, dtype="int64", prob=None):
        _check_ndim("binomial", size, ndim)
        if prob is not None:
            p = prob
        return super().binomial(size, n, p, dtype=dtype)

    def random_integers(self, size=None, low=0, high=1, ndim=None, dtype="int64"):
        _check_ndim("random_integers", size, ndim)
        return super().random_integers(size, low, high, dtype=dtype)

    def choice(self, size=None, a=2, replace=True, p=None, ndim=None, dtype="int64"):
        _check_ndim("choice", size, ndim)
        return super().choice(size, a, replace, p, dtype=dtype)

    def permutation(self, size=None, n=1, ndim=None, dtype="int64"):
        if size not in (None, (), []):
            raise NotImplementedError(
                "theano RandomStreams.permutation(size=...) (several permutations) is not "
                "supported by tensorjit yet"
            )
        return super().permutation(n, dtype=dtype)


class MRG_RandomStreams(_Unsupported, _MRG):
    """``theano.sandbox.rng_mrg.MRG_RandomStreams``."""

    _theano_name = "theano.sandbox.rng_mrg.MRG_RandomStreams"

    def __init__(self, seed: Any = 12345, use_cuda: Any = None):
        super().__init__(seed)

    def uniform(self, size, low=0.0, high=1.0, ndim=None, dtype=None, nstreams=None, **kw):
        _check_ndim("uniform", size, ndim)
        return super().uniform(size, low, high, dtype=dtype, nstreams=nstreams)

    def normal(
        self, size, avg=0.0, std=1.0, ndim=None, dtype=None, nstreams=None, truncate=False, **kw
    ):
        if truncate:
            raise NotImplementedError(
                "theano MRG_RandomStreams.normal(truncate=True) is not supported by tensorjit yet"
            )
        _check_ndim("normal", size, ndim)
        return super().normal(size, avg, std, dtype=dtype, nstreams=nstreams)

    def binomial(self, size=None, p=0.5, n=1, ndim=None, dtype="int64", nstreams=None, **kw):
        _check_ndim("binomial", size, ndim)
        return super().binomial(size, n, p, dtype=dtype, nstreams=nstreams)
