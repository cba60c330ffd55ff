"""Methods for Graphcore IPUs: gc."""
