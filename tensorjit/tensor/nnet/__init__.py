"""Neural-network ops (``tensorjit.tensor.nnet``), as in Theano."""

__all__: list[str] = []
