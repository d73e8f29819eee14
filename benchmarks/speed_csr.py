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
alike; medians and ratios are printed as JSON. `torch.inference_mode`, `--threads` CPU threads.
"""

import argparse
import json
import statistics

import torch

from benchmarks.timing import clock
from pairzoo import create_model, load_tokenizer
from pairzoo.pipelines.pipeline_conditional_similarity import encode_bi_inputs, encode_tri_inputs
from pairzoo.training.synthetic import generate_examples


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
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backbone", default="minilm")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--conditions", type=int, default=20)
    parser.add_argument("--overhead_pairs", type=int, default=1000)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--max_length", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
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
    main()
