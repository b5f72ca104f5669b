"""Independent answers the tests check the package against: brute-force optima, simple bounds and lookups
that no production code needs."""
