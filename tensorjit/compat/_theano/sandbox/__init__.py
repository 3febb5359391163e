"""``theano.sandbox``: only ``rng_mrg`` is provided (no ``cuda``/``gpuarray``)."""
