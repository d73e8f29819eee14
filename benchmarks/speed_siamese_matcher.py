"""Parameter counts and per-pair inference latency of the Siamese matchers (ESIM, RE2, BiMPM, CAFE, DIIN, DRCN;
without / with FA / with SFA: 18 models), of the MiniLM cross-encoder and of a BERT-base-sized cross-encoder (random
weights), in the same process.

    python -m benchmarks.speed_siamese_matcher --batch_sizes 1 32 --length 32 --repeats 20 --threads 1

Every model reads the same sentence pairs, each sentence exactly `--length` tokens (`[CLS] words SEP`); the
cross-encoders read the pair as one `[CLS] s1 SEP s2 SEP` sequence of the same word tokens. The BERT-base-sized one is
pairzoo's cross-encoder on a randomly initialised `BertConfig(hidden_size=768, num_hidden_layers=12,
num_attention_heads=12, intermediate_size=3072)` with MiniLM's vocabulary (the SFA paper's speed comparison; weights do
not change the time). Timings run under `torch.inference_mode` after a warm-up, alternating between the models in every
repeat so that load from other processes hits all of them alike. Medians of wall-clock and process CPU time per forward
are divided by the batch size (per-pair latency) and printed as JSON with the ratios: each host + SFA over both
cross-encoders and each block over its host without it (the targets on them are the method's `speed_targets` in
`pairzoo/zoo/siamese_matcher.py`, checked by `benchmarks/speed.py`). Counted FLOPs per pair
(`benchmarks.timing.counted_flops`: matrix products, convolutions and recurrent layers; at batch 1) compare the models
free of machine load and of per-operator overhead; where arithmetic dominates they bound how low a latency ratio can
go. A Markdown table follows the JSON (`report.py` renders the same table from `speed.json`): parameters (millions,
with and without the input word-embedding matrix), MFLOPs per pair and per-pair wall time at each batch size, next to
the columns of the SFA paper's Table 1 (its parameter counts and latencies, measured on its own hardware); those
figures could not be found in the sources available offline, so the columns read "n/a" rather than guessed numbers.
A bad flag prints one line, `speed_siamese_matcher.py: error: ...`, and exits with status 2
(`pairzoo.console.run_command`).
"""

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import BertConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing pairzoo

from benchmarks.timing import counted_flops, interleaved, medians  # noqa: E402
from pairzoo import create_model, encode_conditional_inputs, get_model_spec, load_tokenizer  # noqa: E402
from pairzoo.configuration.configuration_siamese_matcher import MATCHERS  # noqa: E402
from pairzoo.console import check_at_least, parse_flags, run_command  # noqa: E402
from pairzoo.pipelines.pipeline_conditional_similarity import encode_tri_inputs  # noqa: E402

FEATURE_ATTENTIONS = ("none", "fa", "sfa")
BERT_BASE = "bert-base cross-encoder"
# The SFA paper's Table 1 (parameters in millions, latency in ms, on the paper's hardware), keyed like the models
# here; None where the figure is not available (the paper's table was not reachable offline: no number is guessed).
PAPER_TABLE_1: "dict[str, dict[str, float | None]]" = {
    name: {"params_m": None, "latency_ms": None}
    for name in [f"{m}+{b}" for m in MATCHERS for b in FEATURE_ATTENTIONS] + ["cross-encoder", BERT_BASE]
}
FIRST = "Two women in red jackets are walking their dogs through a park in the early morning fog. " * 4
SECOND = "A man in a grey suit is running to catch a bus that is leaving the station. " * 4


@dataclass
class SiameseSpeedArguments:
    """The flags of `benchmarks/speed_siamese_matcher.py`."""

    batch_sizes: list[int] = field(default_factory=lambda: [1, 32], metadata={"help": "batch sizes, one run each"})
    length: int = field(default=32, metadata={"help": "tokens per sentence, [CLS] and SEP included"})
    warmup: int = field(default=3, metadata={"help": "untimed calls of each model first"})
    repeats: int = field(default=20, metadata={"help": "timed calls of each model (median)"})
    threads: int | None = field(default=None, metadata={"help": "torch threads (default: torch's choice)"})
    hidden_size: int = field(default=150, metadata={"help": "hidden size of the Siamese matchers"})
    matchers: list[str] = field(
        default_factory=lambda: list(MATCHERS),
        metadata={
            "choices": list(MATCHERS),
            "help": "the Siamese matchers timed (each without FA, with FA, with SFA)",
        },
    )

    def __post_init__(self) -> None:
        check_at_least(self, 1, "batch_sizes", "length", "repeats", "threads", "hidden_size")
        check_at_least(self, 0, "warmup")


def _inputs(tokenizer, batch_size: int, length: int) -> "dict[str, dict[str, torch.Tensor]]":
    """Tri inputs (each sentence `length` tokens) and the cross-encoder input of the same word tokens."""
    tri = encode_tri_inputs(tokenizer, [FIRST] * batch_size, [SECOND] * batch_size, max_length=length)
    cross = encode_conditional_inputs(
        tokenizer, [FIRST] * batch_size, [SECOND] * batch_size, max_length=2 * length - 1
    )
    if tri["input_ids"].shape != (batch_size, length) or cross["input_ids"].shape != (batch_size, 2 * length - 1):
        raise ValueError(f"could not build inputs of length {length}.")
    return {"tri": tri, "cross": cross}


def main(argv: "list[str] | None" = None) -> dict:
    """Count and time every model for the flags `argv`; prints the result as JSON and the table, returns the
    result."""
    args = parse_flags(SiameseSpeedArguments, argv, __doc__.split("\n\n")[0])
    if args.threads:
        torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    models, formats, parameters, without_embeddings = {}, {}, {}, {}
    for matcher in args.matchers:
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
    models[BERT_BASE] = bert_base_cross_encoder(models["cross-encoder"].config.backbone_config.vocab_size).eval()
    formats["cross-encoder"] = formats[BERT_BASE] = "cross"
    for name, model in models.items():
        parameters[name] = model.num_parameters()
        without_embeddings[name] = parameters[name] - model.get_input_embeddings().weight.numel()

    tokenizer = load_tokenizer("minilm")
    per_pair: dict[str, dict[str, dict[str, float]]] = {}
    with torch.inference_mode():
        single = _inputs(tokenizer, 1, args.length)
        flops = {
            name: counted_flops(lambda m=model, b=single[formats[name]]: m(**b)) for name, model in models.items()
        }
        for batch_size in args.batch_sizes:
            batches = _inputs(tokenizer, batch_size, args.length)
            calls = {name: (lambda m=model, b=batches[formats[name]]: m(**b)) for name, model in models.items()}
            wall, cpu = medians(interleaved(calls, args.warmup, args.repeats))
            per_pair[str(batch_size)] = {
                name: {"wall_ms": 1e3 * wall[name] / batch_size, "cpu_ms": 1e3 * cpu[name] / batch_size}
                for name in models
            }

    ratios: dict[str, dict[str, float]] = {}
    for batch_size, latency in per_pair.items():
        ratios[batch_size] = {}
        for matcher in args.matchers:
            sfa = latency[f"{matcher}+sfa"]["wall_ms"]
            ratios[batch_size][f"{matcher}+sfa / {BERT_BASE}"] = sfa / latency[BERT_BASE]["wall_ms"]
            ratios[batch_size][f"{matcher}+sfa / cross-encoder"] = sfa / latency["cross-encoder"]["wall_ms"]
        for matcher in args.matchers:
            host = latency[f"{matcher}+none"]["wall_ms"]
            for block in ("fa", "sfa"):
                ratios[batch_size][f"{matcher}+{block} / {matcher}"] = latency[f"{matcher}+{block}"]["wall_ms"] / host
            ratios[batch_size][f"{matcher}+none / cross-encoder"] = host / latency["cross-encoder"]["wall_ms"]
    flop_ratios = {
        f"{name} / {reference}": count / flops[reference]
        for reference in ("cross-encoder", BERT_BASE)
        for name, count in flops.items()
    }
    result = {
        "length": args.length,
        "hidden_size": args.hidden_size,
        "repeats": args.repeats,
        "threads": torch.get_num_threads(),
        "parameters": parameters,
        "parameters_without_embeddings": without_embeddings,
        "flops_per_pair": flops,
        "flop_ratios": flop_ratios,
        "per_pair_latency": per_pair,
        "wall_ratios": ratios,
        "paper_table_1": {
            "available": any(v is not None for row in PAPER_TABLE_1.values() for v in row.values()),
            "note": "paper's, on its hardware",
            "rows": {name: PAPER_TABLE_1[name] for name in models},
        },
    }
    print(json.dumps(result, indent=2))
    print(format_table(result))
    return result


def bert_base_cross_encoder(vocab_size: int) -> torch.nn.Module:
    """pairzoo's cross-encoder (3 labels) on a randomly initialised BERT-base-sized encoder: 12 layers, hidden 768,
    12 heads, feed-forward 3072, with `vocab_size` word embeddings."""
    spec = get_model_spec("cross-encoder")
    backbone = BertConfig(
        vocab_size=vocab_size, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072
    )
    return spec.model_class(spec.config_class(backbone_config=backbone, num_labels=3))


def format_table(result: dict) -> str:
    """The measurements as a Markdown table beside the SFA paper's Table 1 columns ("n/a" where not available)."""
    sizes = list(result["per_pair_latency"])
    flops = result.get("flops_per_pair", {})
    header = ["model", "params (M)", "params w/o emb. (M)"] + (["MFLOPs/pair"] if flops else [])
    header += [f"ms/pair, batch {b}" for b in sizes] + ["paper params (M)", "paper ms"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, count in result["parameters"].items():
        paper = result["paper_table_1"]["rows"][name]
        row = [name, f"{count / 1e6:.2f}", f"{result['parameters_without_embeddings'][name] / 1e6:.3f}"]
        row += [f"{flops[name] / 1e6:.1f}"] if flops else []
        row += [f"{result['per_pair_latency'][b][name]['wall_ms']:.3f}" for b in sizes]
        row += ["n/a" if paper[key] is None else f"{paper[key]:g}" for key in ("params_m", "latency_ms")]
        lines.append("| " + " | ".join(row) + " |")
    note = (
        f"This machine: torch threads: {result['threads']}, sentences of {result['length']} tokens, hidden size "
        f"{result['hidden_size']}, medians of {result['repeats']}; paper columns: the paper's, on its hardware"
    )
    if not result["paper_table_1"]["available"]:
        note += " (not available: the SFA paper's Table 1 could not be retrieved offline; no figure is guessed)"
    return "\n".join([*lines, "", note + "."])


if __name__ == "__main__":
    sys.exit(run_command("speed_siamese_matcher.py", main))
