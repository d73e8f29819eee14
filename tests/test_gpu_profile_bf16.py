"""Every model configuration the `gpu` benchmark profile trains also trains under bf16 autocast, on CPU: a lent GPU
session runs that profile with `bf16=True`, and a dtype bug there costs the session's few minutes (one did: the
Comateformer mix gate met bf16 head outputs in `torch.lerp`). Each arm trains two steps of a tiny-bert model through
`pairzoo.train` with `--bf16 --use_cpu`, which makes Trainer run the forward under CPU autocast."""

import json
import math
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import quality  # noqa: E402

from pairzoo.training.cli import main as train_main  # noqa: E402

TINY_LAYERS, TINY_HEADS = 2, 4  # tiny-bert's depth and heads


def _gpu_arms() -> list:
    """One planned run per (model, config overrides, data set) of the `gpu` profile, seed 0. The task-adapted arms
    are left out: they train the same model classes as their plain twins, on a backbone the MLM step writes first."""
    unique = {}
    for run in quality.plan_runs("gpu", (0,), cuda=True):
        if not run.arm.adapted:
            unique.setdefault((run.arm.model, json.dumps(run.arm.overrides, sort_keys=True), run.dataset), run)
    return list(unique.values())


def _tiny_overrides(overrides: dict) -> dict:
    """The arm's overrides on tiny-bert: router layers past its depth become its last layers, reweighting heads past
    its head count a subset of its first heads."""
    layers, heads = overrides.get("router_layers"), overrides.get("reweight_heads")
    if layers and max(layers) >= TINY_LAYERS:
        last = list(range(TINY_LAYERS - min(len(layers), TINY_LAYERS), TINY_LAYERS))
        overrides = {**overrides, "router_layers": last}
    if heads and max(heads) >= TINY_HEADS:
        overrides = {**overrides, "reweight_heads": list(range(min(len(heads), TINY_HEADS - 1)))}
    return overrides


@pytest.mark.parametrize("run", _gpu_arms(), ids=lambda run: f"{run.comparison.name}:{run.arm.label}:{run.dataset}")
def test_every_gpu_profile_arm_trains_under_bf16_autocast(run, tmp_path, data_dir):
    assert run.train_args.get("bf16") is True  # what the profile asks for on CUDA
    args = {
        **run.train_args,
        "num_train_epochs": 1,
        "max_train_samples": 8,
        "max_eval_samples": 8,
        "per_device_train_batch_size": 4,
        "per_device_eval_batch_size": 8,
        "max_length": 32,
    }
    args.pop("synthetic_train_size", None)
    arm = quality.Arm(run.arm.label, run.arm.model, _tiny_overrides(run.arm.overrides))
    argv = quality.train_argv(arm, run.dataset, 0, args, "tiny-bert", tmp_path)
    result = train_main([*argv, "--data_dir", str(data_dir), "--use_cpu", "True", "--disable_tqdm", "True"])
    assert result["train_steps"] == 2 and math.isfinite(result["metrics"]["train_loss"])
