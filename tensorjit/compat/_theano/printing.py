"""``theano.printing``."""

from tensorjit.printing import Print, debugprint, pp, pprint  # noqa: F401
