"""`make demo`: fine-tune the demo model on the synthetic conditional-similarity set with the bundled MiniLM, print
validation Spearman, write the Hub export folder, reload it in a fresh process (pairzoo not importable,
`AutoModel(..., trust_remote_code=True)`) and score three examples through `pipeline("conditional-similarity")`.

The default is CSR as a bi-encoder (`[CLS] s SEP c SEP`, router in the last layer, mean over the sentence tokens,
cosine): of the zoo's conditional-similarity models it is the one that learns the synthetic condition within a
CPU-minutes budget (the `cpu-medium` benchmark in docs/results.md).
"""

import json
import sys
import time
from dataclasses import dataclass, field

from transformers.utils import logging

from .console import ConsoleArguments, OneLineErrorParser, run_command
from .hub_cards import score_in_fresh_process
from .training.cli import main as train_main

logger = logging.get_logger(__name__)
PROG = "pairzoo.demo"
DEMO_MODEL = "csr"
DEMO_OVERRIDES = {"architecture": "bi"}
EXAMPLES = [
    {
        "sentence1": "Two women in red jackets are walking in a park.",
        "sentence2": "Two men in blue coats are walking on a beach.",
        "condition": condition,
    }
    for condition in ("The number of people.", "The colour of the clothing.", "The activity.")
]


@dataclass
class DemoArguments:
    """The demo run's model, budget and folder."""

    output_dir: str = field(default="outputs/demo", metadata={"help": "Folder of the run and its export."})
    model: str = field(default=DEMO_MODEL, metadata={"help": "Registered model name."})
    config_overrides: str = field(default=json.dumps(DEMO_OVERRIDES), metadata={"help": "JSON, as for pairzoo.train"})
    epochs: float = field(default=2.0, metadata={"help": "Training epochs."})
    train_size: int = field(default=2000, metadata={"help": "Rows of the synthetic training split."})


def main(argv: "list[str] | None" = None) -> dict:
    """Train, export, reload and score (see the module docstring); logs each step and prints the validation
    metrics, the examples' scores and the seconds taken as one JSON line on stdout."""
    parser = OneLineErrorParser((DemoArguments, ConsoleArguments), prog=f"python -m {PROG}", description=__doc__)
    args, _ = parser.parse_args_into_dataclasses(args=sys.argv[1:] if argv is None else argv)
    start = time.time()
    result = train_main(
        [
            "--model", args.model,
            "--config_overrides", args.config_overrides,
            "--backbone", "minilm",
            "--dataset", "synthetic",
            "--synthetic_train_size", str(args.train_size),
            "--max_length", "64",
            "--output_dir", args.output_dir,
            "--num_train_epochs", str(args.epochs),
            "--per_device_train_batch_size", "16",
            "--per_device_eval_batch_size", "64",
            "--learning_rate", "5e-5",
            "--warmup_steps", "0.1",
            "--eval_strategy", "no",
            "--save_strategy", "no",
            "--logging_steps", "50",
            "--seed", "0",
        ]
    )  # fmt: skip
    metrics = result["metrics"]
    logger.info(
        "[demo] %s on MiniLM, synthetic validation: Spearman %.1f, Pearson %.1f",
        args.model,
        metrics["validation_spearman"],
        metrics["validation_pearson"],
    )
    logger.info("[demo] export folder: %s; reloading it in a fresh process without pairzoo ...", result["export_dir"])
    reloaded = score_in_fresh_process(result["export_dir"], EXAMPLES)
    logger.info("[demo] loaded %s", reloaded["class"])
    scale = "1 + 4 x cosine, in [-3, 5]: 5 same direction, 1 orthogonal"
    for example, output in zip(EXAMPLES, reloaded["outputs"]):
        logger.info("[demo] %-30s score %.2f (%s)", example["condition"], output["score"], scale)
    print(json.dumps({"validation": metrics, "examples": reloaded["outputs"], "seconds": round(time.time() - start)}))
    return {"result": result, "examples": reloaded["outputs"]}


if __name__ == "__main__":
    sys.exit(run_command(PROG, main))
