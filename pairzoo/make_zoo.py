"""`make zoo` (`python -m pairzoo.make_zoo`): train the recommended configuration of every method on its home task,
export each with its model card, and check every export where pairzoo is not installed.

One `pairzoo.train` run per entry of `ZOO` (each method's `zoo_entries`, in its module of `pairzoo.zoo`), one at a
time, each in its own process, into `<output_dir>/<entry>/` (checkpoint-free: `metrics.json` and the Hub folder
`export/`). A finished entry (its
`metrics.json` and `export/config.json` exist) is skipped, so an interrupted `make zoo` resumes with the first
unfinished entry; `--force` retrains. Each finished run logs one progress line. Each export's card is then
re-rendered with its own dev numbers in `model-index` and, where the committed benchmark runs of the same recipe
hold its configuration, their comparison with the baseline arm and the sentence-transformers peer: for `--profile
cpu` the tuned comparisons (`benchmarks/results/tuned-*`, every arm at its chosen setting) first, else
`benchmarks/results/cpu-full`; `gpu` for `gpu` (`pairzoo.hub_cards.results.update_model_card`). Then
every export is loaded in one fresh process in which `import pairzoo` fails, with each Auto class of its `auto_map`,
and scores two inputs through the pipeline its card names. `<output_dir>/zoo.json` lists the exports with their dev
numbers; the same table is printed.

Profiles (`--profile`): `cpu` is the sentence-transformers peer's recipe (batch 16, learning rate 2e-5, warmup 0.1,
weight decay 0.01, length 128; STS-B 1 epoch, SICK-E and MRPC 2; the other data sets 2) except where a method's
paper trains with its own schedule (the Siamese matcher: learning rate 1e-3, 3 epochs; neighbor attention: 1e-3),
full training splits; `gpu` is the same at 3 epochs, batch 32, bf16 on CUDA. `--list` prints the plan (entries,
training rows x epochs, done or not) without training.

    python -m pairzoo.make_zoo --list
    python -m pairzoo.make_zoo --output_dir zoo
    python -m pairzoo.make_zoo --only cross-encoder-stsb comateformer-sick-e
"""

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from transformers.utils import logging

from .console import ConsoleArguments, OneLineErrorParser, run_command
from .zoo import MODEL_SPECS, ZooEntry

logger = logging.get_logger(__name__)
PROG = "pairzoo.make_zoo"

REPO = Path(__file__).resolve().parents[1]

# The sentence-transformers CrossEncoder recipe of ../shared/reference/peers_minilm.json.
PEER_RECIPE = {
    "max_length": 128,
    "per_device_train_batch_size": 16,
    "per_device_eval_batch_size": 64,
    "learning_rate": 2e-5,
    "warmup_steps": 0.1,
    "weight_decay": 0.01,
}
PEER_EPOCHS = {"stsb": 1, "sick-e": 2, "mrpc": 2}
DEFAULT_EPOCHS = 2
PROFILES = {
    "cpu": {"args": PEER_RECIPE, "epochs": PEER_EPOCHS},
    "gpu": {
        "args": {**PEER_RECIPE, "per_device_train_batch_size": 32, "per_device_eval_batch_size": 256},
        "epochs": {},
        "default_epochs": 3,
        "cuda_args": {"bf16": True},
    },
}


# Every method's entries, from its module of `pairzoo.zoo`.
ZOO = tuple(entry for spec in MODEL_SPECS for entry in spec.zoo_entries)


def entry_args(entry: ZooEntry, profile: str) -> dict:
    """The training arguments of `entry` under `profile`: recipe, epochs of its data set, the entry's own."""
    spec = PROFILES[profile]
    epochs = spec["epochs"].get(entry.dataset, spec.get("default_epochs", DEFAULT_EPOCHS))
    args = {**spec["args"], "num_train_epochs": epochs, **entry.train_args}
    if profile == "gpu":
        import torch

        if torch.cuda.is_available():
            args.update(spec["cuda_args"])
    return args


def train_command(entry: ZooEntry, args: dict, run_dir: Path, backbone: str, seed: int) -> list[str]:
    """The `pairzoo.train` command line of one entry."""
    command = [sys.executable, "-m", "pairzoo.train", "--model", entry.model, "--backbone", backbone]
    command += ["--dataset", entry.dataset, "--seed", str(seed), "--output_dir", str(run_dir)]
    command += ["--config_overrides", json.dumps(entry.overrides)]
    for key, value in args.items():
        command += [f"--{key}", str(value)]
    return command + [
        "--eval_strategy",
        "no",
        "--save_strategy",
        "no",
        "--report_to",
        "none",
        "--disable_tqdm",
        "True",
    ]


def is_done(run_dir: Path) -> bool:
    """A finished entry: `pairzoo.train` wrote its export, then `metrics.json` (each atomically)."""
    return (run_dir / "metrics.json").is_file() and (run_dir / "export" / "config.json").is_file()


def main_metric(metrics: dict) -> "tuple[str, float]":
    """(name, value) of the run's main dev metric: accuracy for classifiers, Spearman for regressors."""
    for name in ("validation_accuracy", "validation_spearman"):
        if name in metrics:
            return name.split("_", 1)[1], float(metrics[name])
    raise ValueError(f"no accuracy or Spearman among the metrics {sorted(metrics)}")


def example_inputs(pipeline_task: str, dataset_task: str) -> list[dict]:
    """Two inputs for the pipeline an export's card names."""
    if pipeline_task == "pair-similarity":
        return [
            {"text": "A man is playing a guitar.", "text_pair": "A person plays an instrument."},
            {"text": "A woman is slicing an onion.", "text_pair": "A dog runs in the park."},
        ]
    if dataset_task == "conditional-classification":
        return [
            {"sentence1": "The pasta was wonderful but the service was slow.", "condition": "pasta"},
            {"sentence1": "The pasta was wonderful but the service was slow.", "condition": "service"},
        ]
    pair = {"sentence1": "A red car drives past a bakery.", "sentence2": "A blue car parks by a bakery."}
    return [{**pair, "condition": "The colour of the car."}, {**pair, "condition": "The shop."}]


def validate_exports(records: list[dict]) -> None:
    """Load every export in one fresh process without pairzoo and score its two example inputs; adds the pipeline's
    outputs to each record (a failure raises with the process's error output)."""
    from .hub_cards.export import score_exports_in_fresh_process

    jobs = []
    for record in records:
        config = json.loads((Path(record["export"]) / "config.json").read_text())
        auto_classes = sorted(set(config["auto_map"]) - {"AutoConfig"})
        jobs.append(
            {
                "folder": record["export"],
                "examples": example_inputs(record["pipeline"], record["task"]),
                "pipeline_task": record["pipeline"],
                "auto_classes": auto_classes,
            }
        )
    for record, result in zip(records, score_exports_in_fresh_process(jobs, timeout=900)):
        record["loaded_without_pairzoo"] = sorted(result["auto_classes"])
        record["example_outputs"] = result["outputs"]


# The benchmark profile whose run files (benchmarks/results/<name>/runs) give each export's card its comparison with
# the baseline arm of the same comparison: the runs of the same recipe. The peer recipe's comparisons tuned by
# `benchmarks/tune.py` (folders `tuned-*`, every arm at its chosen setting) come first where they cover the entry.
BENCHMARK_PROFILES = {"cpu": "cpu-full", "gpu": "gpu"}
TUNED_PROFILES = {"cpu": "tuned-cpu-full"}
BENCHMARK_RESULTS = REPO / "benchmarks" / "results"


def attach_baseline(record: dict, profile: str) -> None:
    """Re-render the card of `record`'s export with its own dev numbers in `model-index` and, where benchmark runs of
    its configuration exist, their comparison with the baseline arm (and the sentence-transformers peer): the first
    tuned folder (`BENCHMARK_RESULTS/tuned-*`, by name; profile `TUNED_PROFILES[profile]`) whose runs compare it,
    else `BENCHMARK_PROFILES[profile]`'s runs; `record["baseline"]` gets that comparison's rows (None: no such
    runs)."""
    from .hub_cards.results import update_model_card

    tuned = sorted(BENCHMARK_RESULTS.glob("tuned-*")) if profile in TUNED_PROFILES else []
    sources = [(folder, TUNED_PROFILES[profile]) for folder in tuned]
    sources.append((BENCHMARK_RESULTS / BENCHMARK_PROFILES[profile], BENCHMARK_PROFILES[profile]))
    record["baseline"] = None
    for results_dir, name in sources:
        if (results_dir / "runs").is_dir():
            _, baseline = update_model_card(record["export"], results_dir, profile=name, model_index="export")
            if baseline is not None:
                record["baseline"] = baseline["rows"]
                return


def baseline_summary(record: dict) -> str:
    """The zoo table's cell for `record["baseline"]`: per data set, the benchmark delta against the baseline arm."""
    if not record.get("baseline"):
        return "no benchmark runs of this configuration"
    return "; ".join(
        f"{r['dataset']}: {r['arm']}"
        + (" (the baseline)" if r["delta"] is None else f" {r['delta']:+.2f} vs {r['baseline_arm']}")
        + f", {r['n']} seed{'s' if r['n'] > 1 else ''}"
        for r in record["baseline"]
    )


@dataclass
class ZooArguments:
    """Which entries to train, how, and where."""

    output_dir: str = field(default="zoo", metadata={"help": "one folder per entry, and zoo.json"})
    profile: str = field(default="cpu", metadata={"choices": sorted(PROFILES), "help": "training recipe"})
    backbone: str = field(default="minilm", metadata={"help": "backbone of every entry"})
    seed: int = field(default=0, metadata={"help": "training seed of every entry"})
    only: list[str] | None = field(default=None, metadata={"help": "only these entries (None: all)"})
    force: bool = field(default=False, metadata={"help": "retrain finished entries"})
    list: bool = field(default=False, metadata={"help": "print the plan and stop"})


def parse_args(argv: "list[str] | None" = None) -> ZooArguments:
    """The flags of `argv` (default `sys.argv[1:]`); an unknown `--only` entry is a ValueError naming the known
    ones."""
    parser = OneLineErrorParser(
        (ZooArguments, ConsoleArguments), prog=f"python -m {PROG}", description=__doc__.split("\n\n")[0]
    )
    args, _ = parser.parse_args_into_dataclasses(args=sys.argv[1:] if argv is None else argv)
    known = [entry.name for entry in ZOO]
    unknown = sorted(set(args.only or ()) - set(known))
    if unknown:
        raise ValueError(f"--only: unknown entries {unknown}; known: {', '.join(known)}")
    return args


def run(argv: "list[str]") -> None:
    """Train, export and check the zoo (or, with `--list`, print the plan)."""
    from .fileio import write_text_atomic
    from .registry import get_model_spec
    from .training.data import dataset_task, load_dataset

    args = parse_args(argv)
    output_dir = Path(args.output_dir)
    entries = [entry for entry in ZOO if args.only is None or entry.name in args.only]
    records = []
    for position, entry in enumerate(entries, 1):
        run_dir = output_dir / entry.name
        train_args = entry_args(entry, args.profile)
        prefix = f"[{position}/{len(entries)}] {entry.name}"
        if args.list:
            rows = len(load_dataset(entry.dataset, split="train")["train"])
            state = "done" if is_done(run_dir) else "to train"
            print(
                f"{prefix}: {entry.model} on {entry.dataset}, {rows:,} rows x {train_args['num_train_epochs']} "
                f"epochs, {json.dumps(entry.overrides)} ({state}); {entry.why}"
            )
            continue
        if args.force or not is_done(run_dir):
            start = time.time()
            command = train_command(entry, train_args, run_dir, args.backbone, args.seed)
            subprocess.run(command, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
            elapsed = f"trained in {time.time() - start:.0f} s"
        else:
            elapsed = "done earlier"
        result = json.loads((run_dir / "metrics.json").read_text())
        metric, value = main_metric(result["metrics"])
        task = dataset_task(entry.dataset)
        export = run_dir / "export"
        logger.info("%s: %s, dev %s %.2f (%s)", prefix, elapsed, metric, value, export)
        records.append(
            {
                "entry": entry.name,
                "model": entry.model,
                "dataset": entry.dataset,
                "task": task,
                "config_overrides": entry.overrides,
                "train_args": train_args,
                "seed": args.seed,
                "backbone": args.backbone,
                "metric": metric,
                "value": round(value, 2),
                "pipeline": get_model_spec(entry.model).entry_points(task)[1],
                "export": str(export),
                "why": entry.why,
            }
        )
    if args.list:
        return
    for record in records:
        attach_baseline(record, args.profile)
    validate_exports(records)
    write_text_atomic(output_dir / "zoo.json", json.dumps(records, indent=2) + "\n")
    print("| export | data set | dev metric | pipeline | loaded without pairzoo | benchmark against its baseline |")
    print("|---|---|---|---|---|---|")
    for r in records:
        print(
            f"| {r['entry']} | {r['dataset']} | {r['metric']} {r['value']:.2f} | {r['pipeline']} | "
            f"{', '.join(r['loaded_without_pairzoo'])} | {baseline_summary(r)} |"
        )


def main(argv: "list[str] | None" = None) -> int:
    """`run` as a command line: returns the exit status (an error in the input is one line and 2,
    `pairzoo.console.run_command`)."""
    return run_command(PROG, run, argv)


if __name__ == "__main__":
    sys.exit(main())
