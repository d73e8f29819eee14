"""CSR speed: the cached tri-encoder against the bi-encoder, and the router's overhead over the tri-encoder baseline.

    python -m benchmarks.speed_csr --backbone minilm --sentences 200 --conditions 20 --repeats 3

1. Conditioned embeddings of every (sentence, condition) pair, 200 x 20 = 4,000: the tri-encoder with router encodes
   each sentence once up to its first router layer and each condition once, then runs only the router layers per
   pair (`encode_sentences`, `encode_conditions`, `embed`; the timing includes building both caches and
   tokenisation); the bi-encoder with router runs the whole encoder on `[CLS] s SEP c SEP` for every pair.
2. Router overhead: direct (uncached) forward over `--overhead_pairs` (sentence, condition) pairs, tri-encoder with
   router against the C-STS tri-encoder baseline (`use_router=False, tri_head="hadamard"`; it also encodes the
   condition), same backbone weights.

Texts come from the synthetic generator (it has 15 distinct conditions; the rest are generator conditions prefixed
"Considering: "). After a warm-up, repeats alternate between the contenders so load from other processes hits both
alike; medians and ratios are printed as JSON. `torch.inference_mode`, `--threads` CPU threads. A bad flag prints
one line, `speed_csr.py: error: ...`, and exits with status 2 (`pairzoo.console.run_command`).
"""

import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing pairzoo

from benchmarks.timing import clock  # noqa: E402
from pairzoo import create_model, load_tokenizer  # noqa: E402
from pairzoo.console import check_at_least, parse_flags, run_command  # noqa: E402
from pairzoo.pipelines.pipeline_conditional_similarity import encode_bi_inputs, encode_tri_inputs  # noqa: E402
from pairzoo.training.synthetic import generate_examples  # noqa: E402


@dataclass
class CsrSpeedArguments:
    """The flags of `benchmarks/speed_csr.py`."""

    backbone: str = field(default="minilm", metadata={"help": "the backbone of every model"})
    sentences: int = field(default=200, metadata={"help": "distinct sentences of the embedding grid"})
    conditions: int = field(default=20, metadata={"help": "distinct conditions of the embedding grid"})
    overhead_pairs: int = field(
        default=1000, metadata={"help": "(sentence, condition) pairs of the router-overhead forward"}
    )
    batch_size: int = field(default=64, metadata={"help": "rows per batch"})
    max_length: int = field(default=64, metadata={"help": "token limit of each encoded input"})
    repeats: int = field(default=3, metadata={"help": "timed rounds of each contender (median)"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})

    def __post_init__(self) -> None:
        names = ("sentences", "conditions", "overhead_pairs", "batch_size", "max_length", "repeats", "threads")
        check_at_least(self, 1, *names)


def _texts(n_sentences: int, n_conditions: int) -> "tuple[list[str], list[str]]":
    sentences, conditions = [], []
    for example in generate_examples(20 * n_sentences, seed=0):
        if example["sentence1"] not in sentences and len(sentences) < n_sentences:
            sentences.append(example["sentence1"])
        if example["condition"] not in conditions:
            conditions.append(example["condition"])
    base = list(conditions)
    conditions = (base + [f"Considering: {c}" for c in base])[:n_conditions]
    if len(sentences) < n_sentences or len(conditions) < n_conditions:
        raise ValueError("the generator gave too few distinct texts.")
    return sentences, conditions


def main(argv: "list[str] | None" = None) -> dict:
    """Time the contenders for the flags `argv`; prints the result as JSON and returns it."""
    args = parse_flags(CsrSpeedArguments, argv, __doc__.split("\n")[0])
    torch.set_num_threads(args.threads)
    tokenizer = load_tokenizer(args.backbone)
    sentences, conditions = _texts(args.sentences, args.conditions)
    tri = create_model("csr", backbone=args.backbone, architecture="tri").eval()
    bi = create_model("csr", backbone=args.backbone, architecture="bi").eval()
    base = create_model("csr", backbone=args.backbone, architecture="tri", use_router=False, tri_head="hadamard")
    base = base.eval()

    def cached_tri() -> torch.Tensor:
        cache_s = tri.encode_sentences(sentences, tokenizer, args.max_length, args.batch_size)
        cache_c = tri.encode_conditions(conditions, tokenizer, args.max_length, args.batch_size)
        return tri.embed(cache_s, cache_c, batch_size=4 * args.batch_size)

    pairs = [(s, c) for s in sentences for c in conditions]

    def bi_all() -> None:
        for i in range(0, len(pairs), args.batch_size):
            chunk = pairs[i : i + args.batch_size]
            bi(**encode_bi_inputs(tokenizer, [p[0] for p in chunk], None, [p[1] for p in chunk], args.max_length))

    few = pairs[:: max(1, len(pairs) // args.overhead_pairs)][: args.overhead_pairs]

    def direct(model) -> None:
        for i in range(0, len(few), args.batch_size):
            chunk = few[i : i + args.batch_size]
            model(**encode_tri_inputs(tokenizer, [p[0] for p in chunk], None, [p[1] for p in chunk], args.max_length))

    times: dict = {"cached_tri": [], "bi": [], "tri_router_direct": [], "tri_baseline_direct": []}
    with torch.inference_mode():
        embeddings = cached_tri()  # warm-up
        direct(tri)
        direct(base)
        bi(**encode_bi_inputs(tokenizer, [p[0] for p in pairs[:8]], None, [p[1] for p in pairs[:8]], args.max_length))
        for _ in range(args.repeats):
            times["cached_tri"].append(clock(cached_tri)[0])
            times["bi"].append(clock(bi_all)[0])
            times["tri_router_direct"].append(clock(lambda: direct(tri))[0])
            times["tri_baseline_direct"].append(clock(lambda: direct(base))[0])
    median = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "backbone": args.backbone,
        "threads": args.threads,
        "embeddings": list(embeddings.shape),
        "pairs": len(pairs),
        "overhead_pairs": len(few),
        "median_seconds": {k: round(v, 4) for k, v in median.items()},
        "all_seconds": {k: [round(x, 4) for x in v] for k, v in times.items()},
        "bi_over_cached_tri": round(median["bi"] / median["cached_tri"], 2),
        "router_overhead_direct": round(median["tri_router_direct"] / median["tri_baseline_direct"], 3),
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    sys.exit(run_command("speed_csr.py", main))
