"""``theano.tests``."""
