"""Symbolic loops: ``scan`` (Theano's semantics) and the ``Scan`` op it builds."""

from tensorjit.scan.basic import scan
from tensorjit.scan.op import Scan

__all__ = ["Scan", "scan"]
