"""Inference time of SEAVER relative to the cross-encoder baseline, same backbone, same process.

    python -m benchmarks.speed_seaver --backbone minilm --batch_size 32 --length 128 --repeats 15

Both models run on identical full-length inputs (`s1 SEP s2 SEP c`, truncated to exactly `--length` tokens) under
`torch.inference_mode`; after a warm-up, timings alternate between the models so that load from other processes hits
both alike. The medians of wall-clock time and of process CPU time (steadier on a shared machine with `--threads 1`)
are reported with their ratios as JSON, next to the ratio of counted FLOPs (`torch.utils.flop_counter`, matmuls
only), which no load from other processes can disturb. A bad flag prints one line, `speed_seaver.py: error: ...`,
and exits with status 2 (`pairzoo.console.run_command`).
"""

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing pairzoo

from benchmarks.timing import counted_flops, interleaved, medians  # noqa: E402
from pairzoo import create_model, encode_conditional_inputs, load_tokenizer  # noqa: E402
from pairzoo.console import check_at_least, json_object, parse_flags, run_command  # noqa: E402


@dataclass
class SeaverSpeedArguments:
    """The flags of `benchmarks/speed_seaver.py`."""

    backbone: str = field(default="minilm", metadata={"help": "the backbone of both models"})
    batch_size: int = field(default=32, metadata={"help": "rows per batch"})
    length: int = field(default=128, metadata={"help": "tokens per row, every row exactly this long"})
    warmup: int = field(default=3, metadata={"help": "untimed calls of each model first"})
    repeats: int = field(default=15, metadata={"help": "timed calls of each model (median)"})
    threads: int | None = field(default=None, metadata={"help": "torch threads (default: torch's choice)"})
    seaver_overrides: str = field(default="{}", metadata={"help": "SEAVER config overrides as JSON"})

    def __post_init__(self) -> None:
        check_at_least(self, 1, "batch_size", "length", "repeats", "threads")
        check_at_least(self, 0, "warmup")
        json_object(self.seaver_overrides, "seaver_overrides")


def _inputs(backbone: str, batch_size: int, length: int) -> "dict[str, torch.Tensor]":
    """A batch whose every row is exactly `length` tokens (long sentences, truncated; the condition kept)."""
    tokenizer = load_tokenizer(backbone)
    first = "Two women in red jackets are walking their dogs through a park in the early morning fog. " * 8
    second = "A man in a grey suit is running to catch a bus that is leaving the station. " * 8
    batch = encode_conditional_inputs(
        tokenizer, [first] * batch_size, [second] * batch_size, ["The number of people."] * batch_size, length
    )
    if batch["input_ids"].shape != (batch_size, length):
        raise ValueError(f"could not build inputs of length {length}: got {tuple(batch['input_ids'].shape)}.")
    return batch


def main(argv: "list[str] | None" = None) -> dict:
    """Time both models for the flags `argv`; prints the result as JSON and returns it."""
    args = parse_flags(SeaverSpeedArguments, argv, __doc__.split("\n\n")[0])
    if args.threads:
        torch.set_num_threads(args.threads)

    models = {
        "cross-encoder": create_model("cross-encoder", backbone=args.backbone).eval(),
        "seaver": create_model("seaver", backbone=args.backbone, **json.loads(args.seaver_overrides)).eval(),
    }
    batch = _inputs(args.backbone, args.batch_size, args.length)
    with torch.inference_mode():
        calls = {name: (lambda m=model: m(**batch)) for name, model in models.items()}
        wall, cpu = medians(interleaved(calls, args.warmup, args.repeats))
        flops = {name: counted_flops(lambda m=model: m(**batch)) for name, model in models.items()}
    result = {
        "backbone": args.backbone,
        "batch_size": args.batch_size,
        "length": args.length,
        "repeats": args.repeats,
        "threads": torch.get_num_threads(),
        "seaver_overrides": json.loads(args.seaver_overrides),
        "median_wall_seconds": wall,
        "median_cpu_seconds": cpu,
        "wall_ratio_seaver_over_baseline": wall["seaver"] / wall["cross-encoder"],
        "cpu_ratio_seaver_over_baseline": cpu["seaver"] / cpu["cross-encoder"],
        "flops": flops,
        "flop_ratio_seaver_over_baseline": flops["seaver"] / flops["cross-encoder"],
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    sys.exit(run_command("speed_seaver.py", main))
