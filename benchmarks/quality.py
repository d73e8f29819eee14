"""Quality benchmark: every method against its own config-off baseline, same budget and hyper-parameters, 3+ seeds.

Each (comparison, arm, data set, seed) is one `pairzoo.train` run; its result is written, atomically, as one JSON file
under `<output_dir>/runs/` (config, seed, metrics, wall time, hardware, package versions, git commit). Existing files
are kept, so an interrupted benchmark resumes where it stopped (`--force` reruns). `benchmarks/report.py` turns the
files into the Markdown table, the bar chart and the README's "Results" section.

Profiles:
- `cpu-small`: the bundled MiniLM, capped rows, one epoch for every run (also where a comparison trains longer) and
  each comparison on its first (home) data set only (caps in `PROFILES`), run in this process, on 2 CPU cores in
  under an hour. Its numbers say that the pipeline works end to end and how each method moves at a tiny budget;
  they are not the methods' converged quality.
- `cpu-medium`: as `cpu-small` with 2,000 training rows, length 128 and full dev splits (about 3-5 minutes a run
  on 2 cores): the budget of the method issues' notes.
- `full`: any backbone, full training splits, three epochs, each run launched with `accelerate launch` (one GPU or
  several), for a GPU machine.

Neighbor attention's runs also score the decoded [MASK] state (Recall@20, Precision@20; `expressiveness_metrics`) on
their dev split and, when trained on SICK-E, on the first `esnli_rows` e-SNLI dev rows of the profile (200, 1,000,
all); the report lists these as extra rows next to accuracy.

    python benchmarks/quality.py --profile cpu-small --output_dir benchmarks/results/cpu-small
    python benchmarks/quality.py --profile full --backbone roberta-base --only comateformer
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing pairzoo

from pairzoo.fileio import write_text_atomic  # noqa: E402


@dataclass(frozen=True)
class Arm:
    """One model configuration of a comparison: `label` names it in tables; `train_args` only where the method's
    paper trains it differently (e.g. a larger learning rate for parameter-efficient training)."""

    label: str
    model: str
    overrides: dict = field(default_factory=dict)
    train_args: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Comparison:
    """A method's arms against its baseline (the first arm) on `datasets`, with the same training arguments.
    `expressiveness`: after training, also measure Recall@20 / Precision@20 of the decoded [MASK] state
    (`pairzoo.training.expressiveness`) on the run's dev split and, for SICK-E runs, on e-SNLI dev."""

    name: str
    arms: tuple
    datasets: tuple
    train_args: dict = field(default_factory=dict)
    expressiveness: bool = False

    @property
    def baseline(self) -> Arm:
        return self.arms[0]


CSR_TRI = {"architecture": "tri"}
CSR_BI = {"architecture": "bi"}
COMPARISONS = [
    Comparison(
        "seaver",
        (Arm("cross-encoder", "cross-encoder"), Arm("seaver", "seaver")),
        ("synthetic",),
    ),
    Comparison(
        "csr-tri",
        (
            Arm("tri-encoder (hadamard)", "csr", {**CSR_TRI, "use_router": False, "tri_head": "hadamard"}),
            Arm("tri-encoder + router", "csr", CSR_TRI),
        ),
        ("synthetic",),
    ),
    Comparison(
        "csr-bi",
        (
            Arm("bi-encoder", "csr", {**CSR_BI, "use_router": False}),
            Arm("bi-encoder + router", "csr", CSR_BI),
        ),
        ("synthetic",),
    ),
    Comparison(
        "comateformer",
        (
            Arm("plain backbone", "comateformer", {"combined_layers": [], "combined_head_fraction": []}),
            Arm("comateformer", "comateformer"),
        ),
        ("sick-e", "mrpc", "stsb", "rte"),
    ),
]

for _matcher in ("esim", "re2", "bimpm", "cafe", "diin", "drcn"):
    COMPARISONS.append(
        Comparison(
            f"siamese-{_matcher}",
            tuple(
                Arm(
                    f"{_matcher}" + ("" if fa == "none" else f" + {fa}"),
                    "siamese-matcher",
                    {"matcher": _matcher, "feature_attention": fa},
                )
                for fa in ("none", "fa", "sfa")
            ),
            ("sick-e", "mrpc"),
            # small randomly initialised networks on frozen-or-not MiniLM word embeddings: a larger step size
            {"learning_rate": 1e-3, "num_train_epochs": 3},
        )
    )
COMPARISONS.append(
    Comparison(
        "neighbor-attention",
        (
            Arm("full fine-tuning", "neighbor-attention", {"training_mode": "full"}),
            Arm("bitfit", "neighbor-attention", {"training_mode": "bitfit"}, {"learning_rate": 1e-3}),
            Arm("neighbor attention", "neighbor-attention", {"training_mode": "neighbor"}, {"learning_rate": 1e-3}),
            Arm(
                "neighbor attention + reg",
                "neighbor-attention",
                {"training_mode": "neighbor", "lambda_m": 0.1, "lambda_n": 0.1},
                {"learning_rate": 1e-3},
            ),
        ),
        ("sick-e", "rte"),
        expressiveness=True,
    )
)

# The training schedule shared by the CPU profiles; they differ only in rows and length.
CPU_TRAINING = {
    "num_train_epochs": 1,
    "per_device_train_batch_size": 16,
    "per_device_eval_batch_size": 64,
    "learning_rate": 5e-5,
    "warmup_steps": 0.1,
}
PROFILES = {
    "cpu-small": {
        "backbone": "minilm",
        "seeds": (0, 1, 2),
        "args": {
            "max_train_samples": 256,
            "max_eval_samples": 200,
            "max_length": 64,
            **CPU_TRAINING,
        },
        "max_epochs": 1,
        "home_dataset_only": True,
        "esnli_rows": 200,
        "launcher": "in-process",
    },
    "cpu-medium": {
        "backbone": "minilm",
        "seeds": (0, 1, 2),
        "args": {
            "max_train_samples": 2000,
            "max_length": 128,
            **CPU_TRAINING,
        },
        "esnli_rows": 1000,
        "launcher": "in-process",
    },
    "full": {
        "backbone": "minilm",
        "seeds": (0, 1, 2),
        "args": {
            "max_length": 128,
            "num_train_epochs": 3,
            "per_device_train_batch_size": 32,
            "per_device_eval_batch_size": 128,
            "learning_rate": 2e-5,
            "warmup_steps": 0.1,
        },
        "esnli_rows": None,
        "launcher": "accelerate",
    },
}


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
        # result files written while a benchmark runs are not code: they do not make the checkout dirty
        status = ["git", "status", "--porcelain", "--", ".", ":(exclude)benchmarks/results"]
        dirty = subprocess.run(status, cwd=REPO, capture_output=True, text=True).stdout
        return out.stdout.strip() + ("-dirty" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def environment() -> dict:
    """Hardware and package versions of this process, stored in every result file."""
    import torch
    import transformers

    hardware = {
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    return {"hardware": hardware, "versions": versions, "git_commit": _git_commit()}


def available_comparisons() -> list[Comparison]:
    """`COMPARISONS` whose models are registered in this checkout."""
    from pairzoo import list_models

    names = set(list_models())
    return [c for c in COMPARISONS if all(arm.model in names for arm in c.arms)]


def profile_datasets(comparison: Comparison, profile: dict) -> tuple:
    """The data sets `profile` runs `comparison` on: all, or with `home_dataset_only` the first one."""
    return comparison.datasets[:1] if profile.get("home_dataset_only") else comparison.datasets


def profile_train_args(comparison: Comparison, arm: Arm, profile: dict) -> dict:
    """Training arguments of one run: the profile's, then the comparison's, then the arm's; the profile's
    `max_epochs` caps the result."""
    args = {**profile["args"], **comparison.train_args, **arm.train_args}
    if "max_epochs" in profile:
        args["num_train_epochs"] = min(args["num_train_epochs"], profile["max_epochs"])
    return args


def run_id(comparison: Comparison, arm: Arm, dataset: str, seed: int) -> str:
    label = "".join(ch if ch.isalnum() else "-" for ch in arm.label)
    return f"{comparison.name}__{label}__{dataset}__seed{seed}"


def train_argv(
    arm: Arm, dataset: str, seed: int, args: dict, backbone: str, output_dir: Path, export: bool = False
) -> list[str]:
    """`pairzoo.train` flags of one run; `export` keeps the trained model in `<output_dir>/export`."""
    argv = ["--model", arm.model, "--backbone", backbone, "--dataset", dataset, "--seed", str(seed)]
    argv += ["--config_overrides", json.dumps(arm.overrides), "--output_dir", str(output_dir)]
    for key, value in args.items():
        argv += [f"--{key}", str(value)]
    return argv + ["--eval_strategy", "no", "--save_strategy", "no", "--export", str(export), "--report_to", "none"]


def expressiveness_metrics(export_dir: Path, dataset: str, args: dict, esnli_rows: "int | None") -> dict:
    """Recall@20 and Precision@20 of the trained model's decoded [MASK] states (issue 7): on the dev rows the run was
    scored on (keywords: the pair's content words) and, for SICK-E, on the first `esnli_rows` e-SNLI dev rows
    (keywords: content words shared by an explanation and the pair; a proxy for the official highlights)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from pairzoo.training.data import load_dataset
    from pairzoo.training.expressiveness import evaluate_expressiveness

    model = AutoModelForSequenceClassification.from_pretrained(export_dir)
    tokenizer = AutoTokenizer.from_pretrained(export_dir)
    length = int(args.get("max_length", 128))
    evaluations = {"validation": (dataset, "pair", args.get("max_eval_samples"))}
    if dataset == "sick-e":
        evaluations["esnli"] = ("snli", "esnli-proxy", esnli_rows)
    metrics = {}
    for prefix, (name, keywords, limit) in evaluations.items():
        rows = [dict(r) for r in load_dataset(name)["validation"]]
        rows = rows[: int(limit)] if limit is not None else rows
        torch.manual_seed(0)
        result = evaluate_expressiveness(model, tokenizer, rows, keywords, k=20, max_length=length)
        metrics[f"{prefix}_recall@20"] = result["recall@20"]
        metrics[f"{prefix}_precision@20"] = result["precision@20"]
        metrics[f"{prefix}_keyword_examples"] = result["examples_with_keywords"]
    return metrics


def run_one(argv: list[str], launcher: str, output_dir: Path) -> dict:
    """Train and evaluate once; the validation metrics of `pairzoo.train`."""
    if launcher == "in-process":
        from pairzoo.training.cli import main as train_main

        return train_main([*argv, "--disable_tqdm", "True"])["metrics"]
    command = ["accelerate", "launch", "-m", "pairzoo.train", *argv]
    subprocess.run(command, check=True, cwd=REPO)
    return json.loads((output_dir / "metrics.json").read_text())["metrics"]


def write_json_atomic(path: Path, payload: dict) -> None:
    """`payload` as indented JSON, written atomically (`write_text_atomic`)."""
    write_text_atomic(path, json.dumps(payload, indent=2, default=str))


def main(argv: "list[str] | None" = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default="cpu-small")
    parser.add_argument("--output_dir", type=Path, default=None, help="default: benchmarks/results/<profile>")
    parser.add_argument("--backbone", default=None, help="override the profile's backbone")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="override the profile's seeds")
    parser.add_argument("--only", nargs="+", default=None, help="comparison names to run (default: all)")
    parser.add_argument("--datasets", nargs="+", default=None, help="of those, only these data sets (default: all)")
    parser.add_argument("--force", action="store_true", help="rerun runs whose result file exists")
    args = parser.parse_args(argv)
    profile = PROFILES[args.profile]
    output_dir = args.output_dir or REPO / "benchmarks" / "results" / args.profile
    backbone = args.backbone or profile["backbone"]
    seeds = tuple(args.seeds or profile["seeds"])
    comparisons = available_comparisons()
    if args.only:
        unknown = set(args.only) - {c.name for c in comparisons}
        if unknown:
            known = [c.name for c in comparisons]
            raise SystemExit(f"--only: unknown comparison(s) {sorted(unknown)}; known: {known}")
        comparisons = [c for c in comparisons if c.name in args.only]
    if args.datasets:
        unknown = set(args.datasets) - {d for c in comparisons for d in profile_datasets(c, profile)}
        if unknown:
            raise SystemExit(f"--datasets: {sorted(unknown)} not among the selected comparisons' data sets.")
    env = environment()
    started = time.time()
    for comparison in comparisons:
        for dataset in profile_datasets(comparison, profile):
            if args.datasets and dataset not in args.datasets:
                continue
            for seed in seeds:
                for arm in comparison.arms:
                    path = output_dir / "runs" / f"{run_id(comparison, arm, dataset, seed)}.json"
                    if path.exists() and not args.force:
                        continue
                    train_args = profile_train_args(comparison, arm, profile)
                    with tempfile.TemporaryDirectory(prefix="pairzoo-bench-") as scratch:
                        scratch = Path(scratch)
                        run_argv = train_argv(
                            arm, dataset, seed, train_args, backbone, scratch, comparison.expressiveness
                        )
                        t0 = time.time()
                        metrics = run_one(run_argv, profile["launcher"], scratch)
                        if comparison.expressiveness:
                            metrics |= expressiveness_metrics(
                                scratch / "export", dataset, train_args, profile["esnli_rows"]
                            )
                    payload = {
                        "comparison": comparison.name,
                        "arm": arm.label,
                        "baseline": arm == comparison.baseline,
                        "model": arm.model,
                        "config_overrides": arm.overrides,
                        "dataset": dataset,
                        "split": "validation",
                        "seed": seed,
                        "profile": args.profile,
                        "backbone": backbone,
                        "train_args": train_args,
                        "metrics": metrics,
                        "wall_seconds": round(time.time() - t0, 1),
                        **env,
                    }
                    write_json_atomic(path, payload)
                    print(f"[{time.time() - started:7.0f}s] {path.name}: {json.dumps(metrics)}", flush=True)
    print(f"done in {time.time() - started:.0f}s; results in {output_dir / 'runs'}", flush=True)


__all__ = ["Arm", "COMPARISONS", "Comparison", "PROFILES", "available_comparisons", "environment", "run_id"]

if __name__ == "__main__":
    main()
