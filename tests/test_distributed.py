"""Data-parallel `pairzoo.train` on 2 CPU processes (torchrun, torch.distributed over gloo) on a tiny model.

A wrapper around the real CLI records, on each rank, the training rows its collator received and the final weights.
The test checks that the ranks trained one model (identical weights), that they split the data (disjoint halves
covering the training set), and that the effective batch is per-device batch x processes x accumulation steps.
"""

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch
from model_harness import assert_close_after_reload
from safetensors.torch import load_file

REPO = Path(__file__).resolve().parents[1]
ROWS, PER_DEVICE, PROCESSES, ACCUMULATION = 32, 4, 2, 2

_RECORDING_RUN = r"""
import json, os, sys
from safetensors.torch import save_file
import pairzoo.training.cli as cli

out, rank, seen = sys.argv[1], int(os.environ["RANK"]), []
real_make_collator = cli.make_collator

def recording_make_collator(*args, **kwargs):
    collator = real_make_collator(*args, **kwargs)
    def collate(rows):
        seen.append([json.dumps(r, sort_keys=True) for r in rows])
        return collator(rows)
    return collate

class Recording(cli.GuardedTrainer):
    def train(self, *args, **kwargs):
        result = super().train(*args, **kwargs)
        state = {k: v.detach().contiguous() for k, v in self.model.state_dict().items()}
        save_file(state, os.path.join(out, f"rank{rank}.safetensors"))
        record = {"batches": list(seen), "global_step": self.state.global_step,
                  "dataset": [json.dumps(r, sort_keys=True) for r in self.train_dataset]}
        with open(os.path.join(out, f"rank{rank}.json"), "w") as handle:
            json.dump(record, handle)
        seen.clear()
        return result

cli.make_collator = recording_make_collator
cli.GuardedTrainer = Recording
result = cli.main(sys.argv[2:])
with open(os.path.join(out, f"rank{rank}-metrics.json"), "w") as handle:
    json.dump(result, handle)
"""


def test_two_process_gloo_training_keeps_ranks_identical_and_the_effective_batch(tmp_path):
    run_dir = tmp_path / "run"
    args = ["--model", "cross-encoder", "--backbone", "tiny-bert", "--dataset", "synthetic",
            "--synthetic_train_size", str(ROWS), "--synthetic_validation_size", "16", "--max_length", "48",
            "--num_train_epochs", "1", "--per_device_train_batch_size", str(PER_DEVICE),
            "--gradient_accumulation_steps", str(ACCUMULATION), "--learning_rate", "1e-3", "--eval_strategy", "no",
            "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true",
            "--output_dir", str(run_dir)]  # fmt: skip
    script = tmp_path / "recording_run.py"
    script.write_text(_RECORDING_RUN)
    env = {k: v for k, v in os.environ.items() if k not in ("ACCELERATE_USE_CPU", "WORLD_SIZE", "RANK", "LOCAL_RANK")}
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(PROCESSES),
         str(script), str(tmp_path), *args],
        capture_output=True, text=True, cwd=REPO, timeout=600, env={**env, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]

    # The ranks are two processes: one model up to float32 rounding (ranks that trained apart differ by ~1e-3).
    weights = [load_file(tmp_path / f"rank{r}.safetensors") for r in range(PROCESSES)]
    assert weights[0].keys() == weights[1].keys()
    for name in weights[0]:
        assert_close_after_reload(weights[1][name], weights[0][name], msg=f"ranks diverged at {name}")
    exported = load_file(run_dir / "export" / "model.safetensors")
    assert all(torch.equal(exported[name], weights[0][name]) for name in exported)  # rank 0's weights, copied

    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(PROCESSES)]
    effective = PER_DEVICE * PROCESSES * ACCUMULATION
    for record in records:
        assert record["global_step"] == ROWS // effective
        assert [len(batch) for batch in record["batches"]] == [PER_DEVICE] * (ROWS // (PER_DEVICE * PROCESSES))
    per_rank = [Counter(row for batch in record["batches"] for row in batch) for record in records]
    assert [sum(rows.values()) for rows in per_rank] == [ROWS // PROCESSES] * PROCESSES
    assert per_rank[0] + per_rank[1] == Counter(records[0]["dataset"]), "the ranks split the data, no row twice"

    results = [json.loads((tmp_path / f"rank{r}-metrics.json").read_text()) for r in range(PROCESSES)]
    losses = [result["metrics"]["validation_loss"] for result in results]
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)
    saved = json.loads((run_dir / "metrics.json").read_text())
    assert saved["world_size"] == PROCESSES and saved["effective_train_batch_size"] == effective
    assert saved["train_steps"] == ROWS // effective
