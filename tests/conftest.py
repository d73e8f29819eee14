"""Test set-up: offline, Hugging Face caches inside the repo, and shared fixtures."""

import os
from pathlib import Path

os.environ.setdefault("HF_HOME", str(Path(__file__).resolve().parents[1] / ".hf_home"))
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from pairzoo.training.data import resolve_data_dir  # noqa: E402


@pytest.fixture(autouse=True)
def _same_torch_rng_for_every_test() -> None:
    """Every test starts from the same torch RNG state, whatever ran before it: the order of the tests (which
    pytest-randomly shuffles, reseeding only `random` and numpy) must not change what a test draws."""
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared data folder (tests that read real data need it; CI has it beside the clone)."""
    return resolve_data_dir()
