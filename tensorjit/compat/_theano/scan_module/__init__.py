"""``theano.scan_module``; ``scan`` comes from ``tensorjit.scan`` when it is used."""
