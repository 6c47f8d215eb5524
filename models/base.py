"""The recommender contract, model configs and the model registry.

A model is one file ``models/<lowercase name>.py`` holding a ``Recommender`` subclass named
as in its paper, decorated with ``@register_model``, plus its ``<Name>Config`` (defaults
live on the config fields). The contract, after RecBole's ``calculate_loss`` / ``predict`` /
``full_sort_predict``:

- ``training_batches(data, batch_size, rng)`` yields dicts of tensors;
- ``calculate_loss(batch)`` returns a scalar loss;
- ``full_scores(users, seq, seq_len)`` scores every item (column 0 is padding);
- ``embeddings()`` returns (user, item) embedding matrices where the model has them.

Non-gradient models (MostPop, BM25) set ``trainable = False`` and implement ``fit``.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from typing import TYPE_CHECKING, Any, ClassVar, Iterator

import numpy as np
import torch
from pydantic import Field
from torch import nn

from llmrec.config import StrictModel, validate
from llmrec.errors import ConfigError
from llmrec.registry import Registry, expects

if TYPE_CHECKING:
    from llmrec.models.data import RecData

logger = logging.getLogger(__name__)


class ModelConfig(StrictModel):
    """Fields every model config has; each model subclasses it with its own hyper-parameters."""

    name: str = Field(description="model name (lowercase class name, e.g. bprmf, sasrec)")

    def training_protocol(self) -> dict:
        """How training samples are built, where a model has a choice (recorded in ``protocol.json``)."""
        return {}


class Recommender(nn.Module):
    """Base class of every recommender; see the module docstring for the contract."""

    config_cls: ClassVar[type[ModelConfig]] = ModelConfig
    trainable: ClassVar[bool] = True
    uses_sequence: ClassVar[bool] = False
    max_seq_len: int = 50

    def __init__(self, cfg: ModelConfig, data: "RecData"):
        super().__init__()
        self.cfg = cfg
        self.n_users = data.n_users
        self.n_items = data.n_items

    def fit(self, data: "RecData") -> None:
        """Non-gradient models compute their state here (counts, an index)."""

    def prepare_eval(self, histories: list[np.ndarray]) -> None:
        """Called before scoring a phase with each user's history (train, or train+valid)."""

    def training_batches(
        self, data: "RecData", batch_size: int, rng: np.random.Generator
    ) -> Iterator[dict[str, torch.Tensor]]:
        """One epoch of training batches."""
        raise NotImplementedError(f"{type(self).__name__} is not trained by gradient")

    def calculate_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Scalar training loss of one batch."""
        raise NotImplementedError

    def full_scores(self, users: torch.Tensor, seq: torch.Tensor | None, seq_len: torch.Tensor | None) -> torch.Tensor:
        """Scores ``[B, n_items]`` for users ``[B]`` (sequence models read ``seq [B, L]``, right-padded)."""
        raise NotImplementedError

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(user ``[n_users, d]``, item ``[n_items, d]``) embeddings, or None if the model has none."""
        return None


def _discover() -> None:
    import llmrec.models as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        if not mod.ispkg:  # a module holding no model registers nothing
            importlib.import_module(f"llmrec.models.{mod.name}")
    MODELS.freeze()


MODELS: Registry[type[Recommender]] = Registry(
    "model", _discover, expects("model", lambda o: isinstance(o, type) and issubclass(o, Recommender),
                                "a subclass of llmrec.models.base.Recommender"))


def register_model(cls: type[Recommender]) -> type[Recommender]:
    """Class decorator: register under the lowercase class name (the module name)."""
    if not issubclass(cls, Recommender):
        raise TypeError(f"{cls.__name__} must subclass Recommender")
    if cls.config_cls is ModelConfig:
        raise TypeError(f"{cls.__name__} must declare its own config_cls")
    return MODELS.register(cls.__name__.lower(), cls)


def get_model_class(name: str) -> type[Recommender]:
    """The model class registered as ``name`` (case-insensitive); unknown names list the available ones."""
    return MODELS.get(name.lower())


def model_config(data: dict[str, Any] | ModelConfig, prefix: str = "model") -> ModelConfig:
    """Validate a ``model:`` mapping against the config class of the model it names."""
    if isinstance(data, ModelConfig):
        return data
    if not isinstance(data, dict) or "name" not in data:
        raise ConfigError(f"'{prefix}' needs a 'name'. Available: {', '.join(MODELS.names())}")
    data = {**data, "name": str(data["name"]).lower()}
    return validate(get_model_class(data["name"]).config_cls, data, prefix)


def build_model(cfg: ModelConfig, data: "RecData") -> Recommender:
    """Instantiate the model ``cfg.name`` for ``data``."""
    return get_model_class(cfg.name)(cfg, data)
