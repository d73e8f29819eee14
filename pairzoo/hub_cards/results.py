"""Benchmark run files (`benchmarks/quality.py`) summarised: the numbers behind the README's results and the model
cards' `model-index`, computed in one place."""

import json
import statistics
from collections import defaultdict
from pathlib import Path

from ..fileio import write_text_atomic
from ..registry import get_model_spec, list_models
from .export import backbone_name, render_model_card

# Metrics reported beside the main one when a run has them: the [MASK] expressiveness of neighbor attention (issue 7)
# on the run's own dev split and, for models trained on SICK-E, on e-SNLI dev.
EXTRA_METRICS = ("validation_recall@20", "esnli_recall@20")


def main_metric(metrics: dict) -> str:
    """`validation_accuracy` for classification runs, `validation_spearman` for regression runs."""
    for name in ("validation_accuracy", "validation_spearman"):
        if name in metrics:
            return name
    raise ValueError(f"no known main metric among {sorted(metrics)}")


def reported_metrics(metrics: dict) -> list[str]:
    """The main metric, then each of `EXTRA_METRICS` the run has."""
    return [main_metric(metrics), *(name for name in EXTRA_METRICS if metrics.get(name) is not None)]


def load_runs(results_dir: Path) -> list[dict]:
    """Every run file under `<results_dir>/runs/`."""
    runs_dir = results_dir / "runs"
    if not runs_dir.is_dir():
        raise FileNotFoundError(f"no run files: {str(runs_dir)!r} does not exist (run benchmarks/quality.py first).")
    runs = []
    for path in sorted(runs_dir.glob("*.json")):
        try:
            runs.append(json.loads(path.read_text()))
        except json.JSONDecodeError as err:
            raise ValueError(f"result file {str(path)!r} is not valid JSON: {err}") from err
    if not runs:
        raise FileNotFoundError(f"no run files in {str(runs_dir)!r}.")
    return runs


def summarise(runs: list[dict]) -> list[dict]:
    """One row per (comparison, dataset, arm, reported metric): mean/std over seeds and the delta against the baseline
    arm on the same metric; `main` marks the main metric's rows."""
    groups: dict = defaultdict(list)
    order: dict = {}
    for run in runs:
        for metric in reported_metrics(run["metrics"]):
            key = (run["comparison"], run["dataset"], run["arm"], metric)
            groups[key].append(run)
            order.setdefault(key, len(order))
    rows = []
    for key in sorted(groups, key=order.get):
        group, metric = groups[key], key[3]
        values = [r["metrics"][metric] for r in sorted(group, key=lambda r: r["seed"])]
        rows.append(
            {
                "comparison": key[0],
                "dataset": key[1],
                "arm": key[2],
                "model": group[0]["model"],
                "config_overrides": group[0]["config_overrides"],
                "baseline": group[0]["baseline"],
                "metric": metric.removeprefix("validation_"),
                "main": metric == main_metric(group[0]["metrics"]),
                "seeds": sorted(r["seed"] for r in group),
                "values": values,
                "mean": statistics.mean(values),
                "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                "wall_seconds": sum(r["wall_seconds"] for r in group),
                "profile": group[0]["profile"],
                "backbone": group[0]["backbone"],
                "train_args": group[0]["train_args"],
                "hardware": group[0]["hardware"],
                "torch_threads": sorted({r["hardware"]["torch_threads"] for r in group}),
                "git_commits": sorted({r["git_commit"] for r in group}),
            }
        )
    baselines = {(r["comparison"], r["dataset"], r["metric"]): r for r in rows if r["baseline"]}
    for row in rows:
        base = baselines.get((row["comparison"], row["dataset"], row["metric"]))
        if base is None or row["baseline"]:
            row["delta"], row["beyond_spread"] = None, None
            continue
        row["delta"] = row["mean"] - base["mean"]
        spread_known = len(row["values"]) > 1 and len(base["values"]) > 1
        row["beyond_spread"] = abs(row["delta"]) > row["std"] + base["std"] if spread_known else None
    order = {}
    for row in rows:  # (comparison, data set, metric) in order of first appearance, the baseline first within each
        order.setdefault((row["comparison"], row["dataset"], not row["main"], row["metric"]), len(order))
    return sorted(
        rows, key=lambda r: (order[r["comparison"], r["dataset"], not r["main"], r["metric"]], not r["baseline"])
    )


def eval_results_for(results_dir: Path, model: str, config: dict, backbone: "str | None" = None) -> list[dict]:
    """`export_model(eval_results=...)` entries (mean over seeds) of the benchmark arm that describes a model.

    An arm describes the model when its registry name is `model`, its runs used `backbone` (when given), its main
    metric is of the model's kind (Spearman for a regressor, `num_labels == 1`; accuracy for a classifier) and each of
    its config overrides equals the value in `config` (the model's config as a dict); among those, the arm with the
    most overrides (the most specific) wins.
    """
    kind = "spearman" if config.get("num_labels", 1) == 1 else "accuracy"
    rows = [
        r
        for r in summarise(load_runs(results_dir))
        if r["main"]
        and r["model"] == model
        and r["metric"] == kind
        and (backbone is None or r["backbone"] == backbone)
        and all(config.get(k) == v for k, v in r["config_overrides"].items())
    ]
    if not rows:
        return []
    specific = max(len(r["config_overrides"]) for r in rows)
    return [
        {"dataset": r["dataset"], "split": "validation", "metrics": {f"validation_{r['metric']}": r["mean"]}}
        for r in rows
        if len(r["config_overrides"]) == specific
    ]


def update_model_card(folder: "str | Path", results_dir: "str | Path", base_model: "str | None" = None) -> list[dict]:
    """Re-render the model card (README.md) of an export folder with the benchmark results of the arm that describes
    its model (see `eval_results_for`); the card is replaced atomically. Returns the results written."""
    folder = Path(folder)
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{str(config_path)!r} does not exist: not an export folder.")
    config = json.loads(config_path.read_text())
    specs = [get_model_spec(name) for name in list_models()]
    spec = next((s for s in specs if s.config_class.model_type == config.get("model_type")), None)
    if spec is None:
        raise ValueError(f"{str(config_path)!r}: model_type {config.get('model_type')!r} is not a pairzoo model.")
    load_runs(Path(results_dir))  # a missing or broken results folder fails before the model is loaded
    model = spec.model_class.from_pretrained(folder)
    results = eval_results_for(Path(results_dir), spec.name, model.config.to_dict(), backbone_name(model))
    card = render_model_card(model, results, base_model, repo_id=f"pairzoo/{folder.name}")
    write_text_atomic(folder / "README.md", card)
    return results


__all__ = [
    "EXTRA_METRICS",
    "eval_results_for",
    "load_runs",
    "main_metric",
    "reported_metrics",
    "summarise",
    "update_model_card",
]
