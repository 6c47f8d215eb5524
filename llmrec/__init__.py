"""llmrec: evaluate LLMs as recommenders and assistants, at cluster scale.

Core package: configuration, errors, settings, tracking and the CLI. The benchmark
code lives in ``pipelines``, engines in ``serving``, recommenders in ``models``,
sweeps in ``tuning`` and cluster tooling in ``cluster``.
"""

__version__ = "0.1.0"
