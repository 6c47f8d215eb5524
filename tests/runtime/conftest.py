"""Runtime tests use the runner fixtures (PrefEval data root)."""

from tests.pipelines.conftest import data_root  # noqa: F401 - re-exported fixture
