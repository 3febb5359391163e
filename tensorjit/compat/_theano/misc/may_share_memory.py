"""``theano.misc.may_share_memory``."""

from tensorjit.core.devices import kind_of


def may_share_memory(a, b, raise_other_type=True) -> bool:
    """Whether arrays ``a`` and ``b`` may share memory (of any device)."""
    kind_a, kind_b = kind_of(a), kind_of(b)
    if kind_a is None or kind_b is None:
        if raise_other_type:
            raise TypeError(f"may_share_memory: not arrays: {type(a)}, {type(b)}")
        return False
    return kind_a is kind_b and kind_a.may_share_memory(a, b)
