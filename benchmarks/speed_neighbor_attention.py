"""Training-step cost of neighbor attention relative to full fine-tuning (and BitFit), same backbone, same process.

    python -m benchmarks.speed_neighbor_attention --backbone minilm --batch_size 16 --length 96 --repeats 5 --threads 1

All models run one training step (forward with labels, backward, AdamW step over their trainable parameters) on
identical prompt inputs truncated to exactly `--length` tokens; after a warm-up, timings alternate between the models
so that load from other processes hits them alike. Reported as JSON: medians of wall-clock and process CPU time
(steadier on a shared machine with `--threads 1`), their ratios over full fine-tuning, the neighbor-search share of
the neighbor-attention step (time inside `select_neighbors`: the batched h W_e^T / sqrt(d) over the whole vocabulary,
top-K and the k-of-K draw, measured in the same steps), and the same shares in counted FLOPs
(`benchmarks.timing.counted_flops`), which no load from other processes can disturb; and the trainable
parameters as a fraction of the backbone's (target: at most 6%). `benchmarks/speed.py` runs it at length 128.

It also times `--adapt_steps` steps of the task-adaptive MLM pre-step (`python -m pairzoo.adapt_mlm`): the backbone
as a masked LM with an MLM head (built from its config: weights do not change the cost), a batch of
`--adapt_batch_size` sentences of exactly `--adapt_length` tokens masked by `DataCollatorForLanguageModeling` (0.15),
forward, backward and an AdamW step over all parameters, as `adapt_mlm` trains. Reported: the median step and the
total of the N steps, the step's ratio over the full fine-tuning step above (different inputs: sentences, not
prompts), and the estimated cost of one adaptation epoch for `--adapt_corpus_sentences` sentences.
"""

import argparse
import json
import math
import statistics

import torch
from transformers import AutoModelForMaskedLM, DataCollatorForLanguageModeling

from benchmarks.timing import clock, counted_flops, interleaved, medians, trainable_fraction
from pairzoo import create_model, load_tokenizer
from pairzoo.backbones import backbone_config
from pairzoo.modeling.modeling_neighbor_attention import encode_neighbor_attention_inputs

LABEL_WORDS = ["entailment", "neutral", "contradiction"]
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _inputs(backbone: str, batch_size: int, length: int) -> "dict[str, torch.Tensor]":
    """A prompt batch whose every row is exactly `length` tokens (long sentences, truncated), with labels."""
    tokenizer = load_tokenizer(backbone)
    first = "Two women in red jackets are walking their dogs through a park in the early morning fog. " * 8
    second = "A man in a grey suit is running to catch a bus that is leaving the station. " * 8
    batch = encode_neighbor_attention_inputs(
        tokenizer, [first] * batch_size, [second] * batch_size, LABEL_WORDS, max_length=length
    )
    if batch["input_ids"].shape != (batch_size, length):
        raise ValueError(f"could not build inputs of length {length}: got {tuple(batch['input_ids'].shape)}.")
    batch["labels"] = torch.arange(batch_size) % len(LABEL_WORDS)
    return {k: v.to(DEVICE) for k, v in batch.items()}


class _SearchTimer:
    """Wraps a model's `select_neighbors` and accumulates its wall-clock and CPU seconds."""

    def __init__(self, model) -> None:
        self.wall = self.cpu = 0.0
        self.inner = model.select_neighbors
        model.select_neighbors = self

    def __call__(self, *args, **kwargs):
        result = []
        wall, cpu = clock(lambda: result.append(self.inner(*args, **kwargs)))
        self.wall += wall
        self.cpu += cpu
        return result[0]


def _step(model, optimizer, batch) -> None:
    """One training step: forward, backward, AdamW update."""
    optimizer.zero_grad(set_to_none=True)
    model(**batch).loss.backward()
    optimizer.step()


def _backward(model, batch) -> None:
    """Forward and backward, gradients dropped: the FLOPs of a training step without the optimizer update."""
    model(**batch).loss.backward()
    model.zero_grad(set_to_none=True)


@torch.no_grad()
def _search(model, batch) -> None:
    """The neighbor search alone, on the embedding-layer states of `batch`."""
    model.select_neighbors(model.backbone.embeddings(input_ids=batch["input_ids"]), batch["input_ids"])


def _adaptation_steps(backbone: str, steps: int, batch_size: int, length: int) -> "list[tuple[float, float]]":
    """(wall, cpu) seconds of each of `steps` masked-language training steps on `backbone`, after one warm-up step."""
    tokenizer = load_tokenizer(backbone)
    model = AutoModelForMaskedLM.from_config(backbone_config(backbone)).to(DEVICE).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    text = "Two women in red jackets are walking their dogs through a park in the early morning fog. " * 8
    ids = tokenizer(text, truncation=True, max_length=length)["input_ids"]
    if len(ids) != length:
        raise ValueError(f"could not build adaptation inputs of length {length}: got {len(ids)}.")
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, seed=0)
    batch = {k: v.to(DEVICE) for k, v in collator([{"input_ids": ids}] * batch_size).items()}
    return interleaved({"adapt": lambda: _step(model, optimizer, batch)}, 1, steps)["adapt"]


def main(argv: "list[str] | None" = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backbone", default="minilm")
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--length", type=int, default=96)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--overrides", default="{}", help="neighbor-attention config overrides as JSON")
    parser.add_argument("--adapt_steps", type=int, default=5, help="MLM adaptation steps to time (0: none)")
    parser.add_argument("--adapt_batch_size", type=int, default=32, help="adapt_mlm's default batch")
    parser.add_argument("--adapt_length", type=int, default=20, help="tokens per sentence (SICK-E p95: 20)")
    parser.add_argument("--adapt_corpus_sentences", type=int, default=4789, help="SICK-E train: 4789 sentences")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    overrides = {"num_labels": len(LABEL_WORDS), "label_words": LABEL_WORDS, **json.loads(args.overrides)}
    models = {
        mode: create_model("neighbor-attention", backbone=args.backbone, **{**overrides, "training_mode": mode})
        .to(DEVICE)
        .train()
        for mode in ("neighbor", "full", "bitfit")
    }
    optimizers = {
        name: torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
        for name, model in models.items()
    }
    batch = _inputs(args.backbone, args.batch_size, args.length)
    steps = {name: (lambda m=model, o=optimizers[name]: _step(m, o, batch)) for name, model in models.items()}
    interleaved(steps, args.warmup, 0)
    timer = _SearchTimer(models["neighbor"])
    times = interleaved(steps, 0, args.repeats)
    search_wall, search_cpu = timer.wall / args.repeats, timer.cpu / args.repeats
    models["neighbor"].select_neighbors = timer.inner
    flops = {name: counted_flops(lambda m=model: _backward(m, batch)) for name, model in models.items()}
    search_flops = counted_flops(lambda: _search(models["neighbor"], batch))
    wall, cpu = medians(times)
    trainable = {name: sum(p.numel() for p in m.parameters() if p.requires_grad) for name, m in models.items()}
    backbone = models["neighbor"].backbone
    result = {
        "backbone": args.backbone,
        "batch_size": args.batch_size,
        "length": args.length,
        "repeats": args.repeats,
        "threads": torch.get_num_threads(),
        "overrides": json.loads(args.overrides),
        "neighbor_layers": models["neighbor"].neighbor_layers,
        "trainable_parameters": trainable,
        "backbone_parameters": backbone.num_parameters(),
        "trainable_fraction_of_backbone": {name: trainable_fraction(m, of=backbone) for name, m in models.items()},
        "median_step_wall_seconds": wall,
        "median_step_cpu_seconds": cpu,
        "wall_ratio_over_full": {name: wall[name] / wall["full"] for name in models},
        "cpu_ratio_over_full": {name: cpu[name] / cpu["full"] for name in models},
        "neighbor_search_mean_wall_seconds_per_step": search_wall,
        "neighbor_search_share_of_step_wall": search_wall / statistics.mean(t[0] for t in times["neighbor"]),
        "neighbor_search_share_of_step_cpu": search_cpu / statistics.mean(t[1] for t in times["neighbor"]),
        "step_flops": flops,
        "flop_ratio_over_full": {name: flops[name] / flops["full"] for name in models},
        "neighbor_search_flops": search_flops,
        "neighbor_search_share_of_step_flops": search_flops / flops["neighbor"],
    }
    if args.adapt_steps > 0:
        steps = _adaptation_steps(args.backbone, args.adapt_steps, args.adapt_batch_size, args.adapt_length)
        step_wall = statistics.median(t[0] for t in steps)
        result["adaptation"] = {
            "steps": args.adapt_steps,
            "batch_size": args.adapt_batch_size,
            "length": args.adapt_length,
            "median_step_wall_seconds": step_wall,
            "median_step_cpu_seconds": statistics.median(t[1] for t in steps),
            "total_wall_seconds": sum(t[0] for t in steps),
            "step_wall_ratio_over_full_step": step_wall / wall["full"],
            "corpus_sentences": args.adapt_corpus_sentences,
            "estimated_epoch_wall_seconds": step_wall * math.ceil(args.adapt_corpus_sentences / args.adapt_batch_size),
        }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
