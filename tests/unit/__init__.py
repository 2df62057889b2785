"""Unit, golden-wire and property tests: plain data, no cluster."""
