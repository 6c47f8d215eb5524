"""The security tests reuse the tiny data of the model and tuning tests."""

from tests.models.conftest import _one_torch_thread, tiny_data, tiny_split  # noqa: F401 - fixtures
from tests.tuning.conftest import tiny_csv  # noqa: F401 - fixture
