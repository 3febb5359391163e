"""``theano.misc``."""
