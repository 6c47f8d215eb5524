"""The Ray Data runner and one sub-package per benchmark.

A sub-package ``pipelines/<name>/`` whose ``__init__`` exports ``BENCHMARK`` is a
benchmark named ``<name>``; the runner finds it by that name and knows nothing else of it.
"""
