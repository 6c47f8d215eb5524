"""Imported by the plugin tests: records that it was imported, and holds objects that are not benchmarks."""

IMPORTED = []
IMPORTED.append(__name__)
NOT_A_BENCHMARK = {"name": "dict pretending"}


class NotAnEngine:
    pass
