"""Cost of Comateformer's combined heads against the plain backbone on the bundled MiniLM, CPU, forward pass.

Every arm is `ComateformerModel` on the same pretrained weights: `plain` has no combined heads (`combined_layers=[]`,
exactly the backbone); the others have the paper's heads (layers 0-2, 50/40/30% of heads) with each integration
option: `paper` (the paper's form), `paper+count` and `paper+l1` (`key_normalization`), `mix`, `mix+count` and
`mix+l1` (`integration="mix"`, which also runs the combined heads' softmax attention). `gate_bias` costs nothing
measurable (one addition) and is not an arm. Ratios are each arm over `plain`. Inputs are random token ids without
padding, eval mode, `torch.no_grad()` (so no training statistics are recorded).

- Time: every model in THIS process, the same inputs, runs interleaved (plain, paper, ..., plain, ...) after one
  warm-up each, median of `--repeats` runs.
- Peak memory: one fresh subprocess per (arm, length): the kernel's peak resident set size (VmHWM, reset right
  before the forward) during one forward minus the resident size just before it, i.e. the extra memory the forward
  needs (weights and libraries excluded; the total peak is printed too). `tracemalloc` cannot see torch's CPU
  allocator, and the profiler's memory events attribute allocations to ops without the transient buffers inside
  kernels; the OS view sees everything. glibc is told to serve every allocation above 64 KiB with mmap
  (`MALLOC_MMAP_THRESHOLD_=65536`), so freed tensors leave the resident set at once and the peak reflects live memory
  rather than allocator caching.

    python benchmarks/speed_comateformer.py --batch_size 32 --lengths 128 512 --repeats 3 [--arms paper mix+l1]

A bad flag prints one line, `speed_comateformer.py: error: ...`, and exits with status 2
(`pairzoo.console.run_command`).
"""

import argparse
import gc
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing pairzoo
sys.path.insert(0, str(Path(__file__).resolve().parent))
from speed import status_kib  # noqa: E402

from benchmarks.timing import interleaved, medians  # noqa: E402
from pairzoo import ComateformerModel, create_model  # noqa: E402
from pairzoo.console import check_at_least, parse_flags, run_command  # noqa: E402

PLAIN = {"combined_layers": [], "combined_head_fraction": []}
ARMS = {
    "plain": PLAIN,
    "paper": {},
    "paper+count": {"key_normalization": "count"},
    "paper+l1": {"key_normalization": "l1"},
    "mix": {"integration": "mix"},
    "mix+count": {"integration": "mix", "key_normalization": "count"},
    "mix+l1": {"integration": "mix", "key_normalization": "l1"},
}


@dataclass
class ComateformerSpeedArguments:
    """The flags of `benchmarks/speed_comateformer.py`."""

    batch_size: int = field(default=32, metadata={"help": "rows per batch"})
    lengths: list[int] = field(default_factory=lambda: [128, 512], metadata={"help": "tokens per row, one run each"})
    repeats: int = field(default=3, metadata={"help": "timed forwards of each arm (median)"})
    arms: list[str] | None = field(
        default=None,
        metadata={
            "choices": [arm for arm in ARMS if arm != "plain"],
            "help": "the arms compared with `plain` (default: all)",
        },
    )
    # (internal) run in the subprocess that measures one arm's memory
    memory_child: str | None = field(default=None, metadata={"choices": sorted(ARMS), "help": argparse.SUPPRESS})

    def __post_init__(self) -> None:
        check_at_least(self, 1, "batch_size", "lengths", "repeats")


def build(arm: str):
    """`ComateformerModel` on pretrained MiniLM for `arm` (eval mode)."""
    classifier = create_model("comateformer", backbone="minilm", **ARMS[arm])
    model = ComateformerModel(classifier.config)
    model.backbone.load_state_dict(classifier.backbone.state_dict())
    return model.eval()


def make_inputs(batch_size: int, length: int) -> dict:
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(1000, 20000, (batch_size, length), generator=generator)
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}


def memory_child(arm: str, batch_size: int, length: int) -> None:
    """(In a subprocess.) Print the peak extra resident memory of one forward pass as JSON.

    Loading the model has its own higher transient peak, so the kernel's high-water mark (VmHWM) is reset right before
    the forward by writing 5 to /proc/self/clear_refs (Linux >= 4.0).
    """
    model, inputs = build(arm), make_inputs(batch_size, length)
    gc.collect()
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    before = status_kib("VmRSS")
    with torch.no_grad():
        model(**inputs)
    peak = status_kib("VmHWM")
    print(json.dumps({"peak_extra_mib": (peak - before) / 1024, "peak_total_mib": peak / 1024}))


def measure_memory(arm: str, batch_size: int, length: int) -> dict:
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    cmd = [sys.executable, __file__, "--memory_child", arm, "--batch_size", str(batch_size), "--lengths", str(length)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_time(models: dict, inputs: dict, repeats: int) -> dict:
    with torch.no_grad():
        calls = {arm: (lambda m=model: m(**inputs)) for arm, model in models.items()}
        return medians(interleaved(calls, 1, repeats))[0]


def main(argv: "list[str] | None" = None) -> None:
    """Time and measure every arm for the flags `argv`, printing one JSON line per length."""
    args = parse_flags(ComateformerSpeedArguments, argv, __doc__.split("\n")[0])
    if args.memory_child:
        memory_child(args.memory_child, args.batch_size, args.lengths[0])
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch_size}", flush=True)
    arms = ["plain", *(args.arms or [a for a in ARMS if a != "plain"])]
    models = {arm: build(arm) for arm in arms}
    for length in args.lengths:
        seconds = measure_time(models, make_inputs(args.batch_size, length), args.repeats)
        memory = {arm: measure_memory(arm, args.batch_size, length) for arm in arms}
        plain_memory = memory["plain"]
        row = {
            "length": length,
            "forward_s": seconds,
            "time_ratio": {arm: seconds[arm] / seconds["plain"] for arm in arms[1:]},
            "memory_mib": memory,
            "peak_extra_ratio": {
                arm: memory[arm]["peak_extra_mib"] / plain_memory["peak_extra_mib"] for arm in arms[1:]
            },
            "peak_total_ratio": {
                arm: memory[arm]["peak_total_mib"] / plain_memory["peak_total_mib"] for arm in arms[1:]
            },
        }
        if length == 128 and args.batch_size == 32:
            row["targets_met"] = {
                arm: {
                    "time<=1.5x": row["time_ratio"][arm] <= 1.5,
                    "memory<=1.3x": row["peak_extra_ratio"][arm] <= 1.3,
                }
                for arm in arms[1:]
            }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    sys.exit(run_command("speed_comateformer.py", main))
