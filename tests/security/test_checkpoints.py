"""Issue 22: a checkpoint is read as tensors and plain values only; one whose pickle would run
code is refused with a clear message, and its code never runs."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner
import torch

from llmrec.cli import app
from llmrec.errors import ConfigError
from llmrec.models.base import build_model, model_config
from llmrec.models.trainer import TrainerConfig, fit, load_checkpoint
from tests.tuning.helpers import base_config, write_config

REPO = Path(__file__).resolve().parents[2]


class Payload:
    """Unpickling this runs a shell command that creates ``marker``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def plant(path: Path, marker: Path) -> None:
    """A checkpoint that looks like ours but carries a payload in its metadata."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": {}, "optimizer": None, "state": {"epoch": 0, "best": 0.0, "bad": 0, "valid": {}},
                "config": Payload(marker)}, path)


def bprmf(data):
    return build_model(model_config({"name": "bprmf", "embedding_size": 8}), data)


def test_a_malicious_checkpoint_is_refused_and_its_code_never_runs(tiny_data, tmp_path):
    marker = tmp_path / "pwned"
    plant(tmp_path / "ck" / "last.pt", marker)
    with pytest.raises(ConfigError, match=r"last.pt: refused to load.*other than tensors and plain values"):
        fit(bprmf(tiny_data), tiny_data, TrainerConfig(epochs=2, device="cpu"), tmp_path / "ck", resume=tmp_path / "ck")
    plant(tmp_path / "best" / "best.pt", marker)
    with pytest.raises(ConfigError, match=r"best.pt: refused to load.*GLOBAL posix.system"):
        load_checkpoint(bprmf(tiny_data), tmp_path / "best")
    from llmrec.models.trainer import load_payload

    with pytest.raises(ConfigError, match="refused to load"):  # the SFT trainer state goes through the same reader
        load_payload(tmp_path / "best" / "best.pt")
    assert not marker.exists()


def test_llmrec_train_resume_refuses_a_planted_last_pt(tmp_path, tiny_csv):
    cfg = base_config(tmp_path, tracking={"enabled": False}, output={"dir": str(tmp_path / "runs"), "run_name": "r"})
    path = write_config(tmp_path, cfg)
    marker = tmp_path / "pwned"
    plant(tmp_path / "runs" / "r" / "checkpoint" / "last.pt", marker)
    from llmrec.config import dump_yaml, load_config
    from llmrec.tuning.config import TrainConfig

    # the planted file sits beside the run's own config, so only the loader stands between it and the process
    (tmp_path / "runs" / "r" / "resolved.yaml").write_text(dump_yaml(load_config(TrainConfig, path)))
    out = CliRunner().invoke(app, ["train", path, "--resume"])
    assert out.exit_code == 2, out.output
    assert "refused to load" in out.output and "Traceback" not in out.output
    assert not marker.exists()


def test_checkpoints_written_by_the_trainer_hold_only_tensors_and_plain_values(tiny_data, tmp_path):
    fit(bprmf(tiny_data), tiny_data, TrainerConfig(epochs=2, device="cpu"), tmp_path / "ck")
    for name in ("best.pt", "last.pt"):
        payload = torch.load(tmp_path / "ck" / name, weights_only=True)  # raises on anything else
        assert payload["state"]["epoch"] >= 0
    assert {"numpy", "torch", "python"} <= set(torch.load(tmp_path / "ck" / "last.pt", weights_only=True)["rng"])


def test_the_sft_trainer_state_is_plain(tmp_path):
    from llmrec.models.trainer import load_payload

    transformers = pytest.importorskip("transformers")
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = transformers.get_linear_schedule_with_warmup(opt, 1, 10)
    model(torch.ones(1, 2)).sum().backward()
    opt.step()
    sched.step()
    torch.save({"optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "step": 1}, tmp_path / "s.pt")
    state = load_payload(tmp_path / "s.pt")
    sched.load_state_dict(state["scheduler"])
    assert state["step"] == 1


def test_no_checkpoint_is_read_with_full_pickle():
    """Every torch.load in the code loads weights only (a new reader cannot slip back to pickle)."""
    offenders = []
    for folder in ("llmrec", "models", "tuning", "pipelines", "serving", "cluster", "perf"):
        for f in (REPO / folder).rglob("*.py"):
            text = f.read_text(encoding="utf-8")
            for m in re.finditer(r"torch\.load\(([^)]*)\)", text):
                if "weights_only=True" not in m.group(1):
                    offenders.append(f"{f.relative_to(REPO)}: {m.group(0)}")
    assert not offenders
