"""Inference time of SEAVER relative to the cross-encoder baseline, same backbone, same process.

    python -m benchmarks.speed_seaver --backbone minilm --batch_size 32 --length 128 --repeats 15

Both models run on identical full-length inputs (`s1 SEP s2 SEP c`, truncated to exactly `--length` tokens) under
`torch.inference_mode`; after a warm-up, timings alternate between the models so that load from other processes hits
both alike. The medians of wall-clock time and of process CPU time (steadier on a shared machine with `--threads 1`)
are reported with their ratios as JSON, next to the ratio of counted FLOPs (`torch.utils.flop_counter`, matmuls
only), which no load from other processes can disturb.
"""

import argparse
import json

import torch

from benchmarks.timing import counted_flops, interleaved, medians
from pairzoo import create_model, encode_conditional_inputs, load_tokenizer


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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backbone", default="minilm")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--seaver_overrides", default="{}", help="SEAVER config overrides as JSON")
    args = parser.parse_args(argv)
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
    main()
