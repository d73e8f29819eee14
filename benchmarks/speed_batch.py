"""Batch scoring speed: pairzoo's `pair-similarity` pipeline against sentence-transformers' `CrossEncoder.predict`, on
the same pairs.

The STS-B *dev* pairs (validation split; the test split is held out), batch 32, the MiniLM cross-encoder (`minilm`
backbone, random regression head on 0-5: speed does not depend on the head's values). Three columns:

- `pairzoo`: the pipeline on the model;
- `sentence-transformers`: sentence-transformers' own `CrossEncoder` on the same MiniLM weights (its
  `BertForSequenceClassification`, the tokenizer's pair encoding), the reference for speed;
- `CrossEncoder on the export`: the model exported once and loaded by `CrossEncoder(export, trust_remote_code=True)`,
  which encodes with pairzoo's encoders and returns the pipeline's scores (the largest difference from the
  pipeline's is printed as a check).

All run in this process, interleaved (one untimed warm-up round, then `--repeats` rounds calling each in turn),
medians; the last lines are the time ratios of pairzoo's pipeline to sentence-transformers' own CrossEncoder and of
the export through `CrossEncoder.predict` to pairzoo's pipeline (below 1: the first is faster).

    python benchmarks/speed_batch.py              # all 1,500 dev pairs
    python benchmarks/speed_batch.py --limit 64   # a quick check

A bad flag prints one line, `speed_batch.py: error: ...`, and exits with status 2 (`pairzoo.console.run_command`).
"""

import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))  # run from a checkout without installing pairzoo

from benchmarks.timing import interleaved, medians  # noqa: E402
from pairzoo import create_model, load_tokenizer  # noqa: E402
from pairzoo.backbones import resolve_backbone  # noqa: E402
from pairzoo.console import check_at_least, parse_flags, run_command  # noqa: E402
from pairzoo.hub_cards import export_model  # noqa: E402
from pairzoo.training.data import load_dataset  # noqa: E402


@dataclass
class BatchArguments:
    """The flags of `benchmarks/speed_batch.py`."""

    limit: int | None = field(default=None, metadata={"help": "Score only the first N dev pairs (default: all)."})
    batch_size: int = field(default=32, metadata={"help": "Pairs per batch, for every column."})
    repeats: int = field(default=3, metadata={"help": "Timed rounds (median)."})
    backbone: str = field(default="minilm", metadata={"help": "The cross-encoders' backbone."})
    data_dir: str | None = field(
        default=None, metadata={"help": "Folder holding STS-B/ (default: the shared data folder)."}
    )

    def __post_init__(self) -> None:
        check_at_least(self, 1, "limit", "batch_size", "repeats")


def main(argv: "list[str] | None" = None) -> "dict[str, float]":
    """Print the three timings, the score check and the ratios; returns the median wall seconds per column."""
    from sentence_transformers import CrossEncoder
    from transformers import pipeline

    args = parse_flags(BatchArguments, argv, __doc__.split("\n\n")[0])
    rows = load_dataset("stsb", data_dir=args.data_dir, split="validation")["validation"]
    pairs = list(zip(rows["sentence1"], rows["sentence2"]))[: args.limit]
    torch.manual_seed(0)
    model = create_model("cross-encoder", backbone=args.backbone, label_min=0.0, label_max=5.0).eval()
    tokenizer = load_tokenizer(args.backbone)
    scorer = pipeline("pair-similarity", model=model, tokenizer=tokenizer, device="cpu")
    inputs = [{"text": a, "text_pair": b} for a, b in pairs]
    plain = CrossEncoder(resolve_backbone(args.backbone), num_labels=1, device="cpu")
    with tempfile.TemporaryDirectory() as tmp:
        exported = CrossEncoder(
            str(export_model(model, tokenizer, Path(tmp) / "export", task="pair-regression")),
            trust_remote_code=True,
            device="cpu",
        )
    results = {}
    calls = {
        "pairzoo": lambda: results.__setitem__("pairzoo", scorer(inputs, batch_size=args.batch_size)),
        "sentence-transformers": lambda: plain.predict(pairs, batch_size=args.batch_size),
        "CrossEncoder on the export": lambda: results.__setitem__(
            "export", exported.predict(pairs, batch_size=args.batch_size)
        ),
    }
    with torch.inference_mode():
        wall, _ = medians(interleaved(calls, warmup=1, repeats=args.repeats))
    ours = torch.tensor([r["score"] for r in results["pairzoo"]])
    through_export = torch.as_tensor(results["export"]).float()
    print(f"{len(pairs)} STS-B dev pairs, batch {args.batch_size}, {args.backbone}, {torch.get_num_threads()} threads")
    for name, seconds in wall.items():
        print(f"{name}: {seconds:.3f} s median of {args.repeats} ({len(pairs) / seconds:.1f} pairs/s)")
    print(
        f"largest score difference, export vs pipeline (0-5 scale): {float((ours - through_export).abs().max()):.2e}"
    )
    print(f"pairzoo / sentence-transformers time ratio: {wall['pairzoo'] / wall['sentence-transformers']:.3f}")
    print(
        f"CrossEncoder on the export / pairzoo time ratio: {wall['CrossEncoder on the export'] / wall['pairzoo']:.3f}"
    )
    return wall


if __name__ == "__main__":
    sys.exit(run_command("speed_batch.py", main))
