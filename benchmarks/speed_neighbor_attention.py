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

A bad flag prints one line, `speed_neighbor_attention.py: error: ...`, and exits with status 2
(`pairzoo.console.run_command`).
"""

import json
import math
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoModelForMaskedLM, DataCollatorForLanguageModeling

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing pairzoo

from benchmarks.timing import clock, counted_flops, interleaved, medians, trainable_fraction  # noqa: E402
from pairzoo import create_model, load_tokenizer  # noqa: E402
from pairzoo.backbones import backbone_config  # noqa: E402
from pairzoo.console import check_at_least, json_object, parse_flags, run_command  # noqa: E402
from pairzoo.modeling.encoders import embedding_output  # noqa: E402
from pairzoo.modeling.modeling_neighbor_attention import encode_neighbor_attention_inputs  # noqa: E402

LABEL_WORDS = ["entailment", "neutral", "contradiction"]
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@dataclass
class NeighborSpeedArguments:
    """The flags of `benchmarks/speed_neighbor_attention.py`."""

    backbone: str = field(default="minilm", metadata={"help": "the backbone of every model"})
    batch_size: int = field(default=16, metadata={"help": "prompts per training step"})
    length: int = field(default=96, metadata={"help": "tokens per prompt, every prompt exactly this long"})
    warmup: int = field(default=1, metadata={"help": "untimed steps of each model first"})
    repeats: int = field(default=5, metadata={"help": "timed steps of each model (median)"})
    threads: int | None = field(default=None, metadata={"help": "torch threads (default: torch's choice)"})
    overrides: str = field(default="{}", metadata={"help": "neighbor-attention config overrides as JSON"})
    adapt_steps: int = field(default=5, metadata={"help": "MLM adaptation steps to time (0: none)"})
    adapt_batch_size: int = field(default=32, metadata={"help": "adapt_mlm's default batch"})
    adapt_length: int = field(default=20, metadata={"help": "tokens per sentence (SICK-E p95: 20)"})
    adapt_corpus_sentences: int = field(default=4789, metadata={"help": "SICK-E train: 4789 sentences"})

    def __post_init__(self) -> None:
        names = ("batch_size", "length", "repeats", "threads", "adapt_batch_size", "adapt_length")
        check_at_least(self, 1, *names, "adapt_corpus_sentences")
        check_at_least(self, 0, "warmup", "adapt_steps")
        json_object(self.overrides, "overrides")


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
    """The neighbor search alone, on the hidden states entering the backbone's first layer for `batch`."""
    states = embedding_output(
        model.backbone, batch["input_ids"], batch.get("token_type_ids"), batch.get("attention_mask")
    )
    model.select_neighbors(states, batch["input_ids"])


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
    """Time the training steps for the flags `argv`; prints the result as JSON and returns it."""
    args = parse_flags(NeighborSpeedArguments, argv, __doc__.split("\n\n")[0])
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
    sys.exit(run_command("speed_neighbor_attention.py", main))
