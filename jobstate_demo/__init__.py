"""The demo and the vendor simulator: outside the core package, run by ``make demo``, the tests and the Makefile."""
