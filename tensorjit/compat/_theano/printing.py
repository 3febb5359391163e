"""``theano.printing``."""

from tensorjit.printing import Print, debugprint, pp, pprint, pydotprint  # noqa: F401
