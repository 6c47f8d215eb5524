"""A benchmarks folder holding one benchmark that does not conform to the protocol (tests of the checks)."""
