"""Per-pair inference latency of the Siamese matchers (ESIM, RE2; without / with FA / with SFA) and of the MiniLM
cross-encoder, in the same process.

    python -m benchmarks.speed_siamese_matcher --batch_sizes 1 32 --length 32 --repeats 20 --threads 1

Every model reads the same sentence pairs, each sentence exactly `--length` tokens (`[CLS] words SEP`); the
cross-encoder reads the pair as one `[CLS] s1 SEP s2 SEP` sequence of the same word tokens. Timings run under
`torch.inference_mode` after a warm-up, alternating between the models in every repeat so that load from other
processes hits all of them alike. Medians of wall-clock and process CPU time per forward are divided by the batch
size (per-pair latency) and printed as JSON with the issue's two ratios: RE2+SFA over the cross-encoder (target at
most 0.1) and each block over its host without it (target for SFA at most 2).
"""

import argparse
import json
import statistics
import time

import torch

from pairzoo import create_model, encode_conditional_inputs, load_tokenizer
from pairzoo.pipelines.pipeline_conditional_similarity import encode_tri_inputs

MATCHERS = ("esim", "re2")
FEATURE_ATTENTIONS = ("none", "fa", "sfa")
FIRST = "Two women in red jackets are walking their dogs through a park in the early morning fog. " * 4
SECOND = "A man in a grey suit is running to catch a bus that is leaving the station. " * 4


def _inputs(tokenizer, batch_size: int, length: int) -> "dict[str, dict[str, torch.Tensor]]":
    """Tri inputs (each sentence `length` tokens) and the cross-encoder input of the same word tokens."""
    tri = encode_tri_inputs(tokenizer, [FIRST] * batch_size, [SECOND] * batch_size, max_length=length)
    cross = encode_conditional_inputs(
        tokenizer, [FIRST] * batch_size, [SECOND] * batch_size, max_length=2 * length - 1
    )
    if tri["input_ids"].shape != (batch_size, length) or cross["input_ids"].shape != (batch_size, 2 * length - 1):
        raise ValueError(f"could not build inputs of length {length}.")
    return {"tri": tri, "cross": cross}


def _time_once(model, batch) -> "tuple[float, float]":
    """Wall-clock and process CPU seconds of one forward."""
    wall, cpu = time.perf_counter(), time.process_time()
    model(**batch)
    return time.perf_counter() - wall, time.process_time() - cpu


def main(argv: "list[str] | None" = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch_sizes", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--length", type=int, default=32, help="tokens per sentence, [CLS] and SEP included")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--hidden_size", type=int, default=150, help="hidden size of the Siamese matchers")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    models, formats, parameters = {}, {}, {}
    for matcher in MATCHERS:
        for block in FEATURE_ATTENTIONS:
            name = f"{matcher}+{block}"
            models[name] = create_model(
                "siamese-matcher",
                backbone="minilm",
                matcher=matcher,
                feature_attention=block,
                hidden_size=args.hidden_size,
                num_labels=3,
            ).eval()
            formats[name] = "tri"
    models["cross-encoder"] = create_model("cross-encoder", backbone="minilm", num_labels=3).eval()
    formats["cross-encoder"] = "cross"
    for name, model in models.items():
        parameters[name] = model.num_parameters()

    tokenizer = load_tokenizer("minilm")
    per_pair: dict[str, dict[str, dict[str, float]]] = {}
    with torch.inference_mode():
        for batch_size in args.batch_sizes:
            batches = _inputs(tokenizer, batch_size, args.length)
            times: dict[str, list[tuple[float, float]]] = {name: [] for name in models}
            for _ in range(args.warmup):
                for name, model in models.items():
                    _time_once(model, batches[formats[name]])
            for _ in range(args.repeats):
                for name, model in models.items():
                    times[name].append(_time_once(model, batches[formats[name]]))
            per_pair[str(batch_size)] = {
                name: {
                    "wall_ms": 1e3 * statistics.median(t[0] for t in values) / batch_size,
                    "cpu_ms": 1e3 * statistics.median(t[1] for t in values) / batch_size,
                }
                for name, values in times.items()
            }

    ratios: dict[str, dict[str, float]] = {}
    for batch_size, latency in per_pair.items():
        ratios[batch_size] = {
            "re2+sfa / cross-encoder (target <= 0.1)": latency["re2+sfa"]["wall_ms"]
            / latency["cross-encoder"]["wall_ms"],
        }
        for matcher in MATCHERS:
            host = latency[f"{matcher}+none"]["wall_ms"]
            for block in ("fa", "sfa"):
                target = " (target <= 2)" if block == "sfa" else ""
                ratios[batch_size][f"{matcher}+{block} / {matcher}{target}"] = (
                    latency[f"{matcher}+{block}"]["wall_ms"] / host
                )
            ratios[batch_size][f"{matcher}+none / cross-encoder"] = host / latency["cross-encoder"]["wall_ms"]
    result = {
        "length": args.length,
        "hidden_size": args.hidden_size,
        "repeats": args.repeats,
        "threads": torch.get_num_threads(),
        "parameters": parameters,
        "per_pair_latency": per_pair,
        "wall_ratios": ratios,
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
