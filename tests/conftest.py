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

from pairzoo.training.data import resolve_data_dir  # noqa: E402


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared data folder (tests that read real data need it; CI has it beside the clone)."""
    return resolve_data_dir()
