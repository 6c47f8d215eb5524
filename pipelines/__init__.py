"""The LLM evaluation pipeline.

- ``protocol``: the Benchmark protocol (what a benchmark supplies); depends on nothing above it.
- ``registry``: finds benchmarks by name (every sub-package of ``benchmarks/``).
- ``benchmarks/<name>/``: one package per benchmark, plain functions, no Ray, no engine.
- ``common/``: helpers below the benchmarks and the runner (templates, seeding, stats,
  JSON-lines, data directories, the result store).
- ``runner/``: the generic Ray Data runner; it knows the protocol, never a benchmark.
"""
