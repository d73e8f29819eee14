"""Benchmark run files (`benchmarks/quality.py`) summarised: the numbers behind the README's results and the model
cards' `model-index`, computed in one place."""

import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

from ..fileio import write_text_atomic
from ..registry import get_model_spec, list_models
from .export import CARD_INPUTS_FILE, backbone_name, read_card_inputs, render_model_card

# Metrics reported beside the main one when a run has them: the [MASK] expressiveness of neighbor attention on the
# run's own dev split and, for models trained on SICK-E, on e-SNLI dev.
EXTRA_METRICS = ("validation_recall@20", "esnli_recall@20")
# The sentence-transformers CrossEncoder's numbers on the bundled MiniLM, beside the clone, never in it.
PEERS_PATH = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "peers_minilm.json"


def defined(value: object) -> bool:
    """Whether a metric value is a finite number (an undefined metric is written `null`; a `NaN` or infinity, as an
    older or hand-written run file may hold, is undefined too)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def main_metric(metrics: dict) -> str:
    """`validation_accuracy` for classification runs, `validation_spearman` for regression runs, `validation_mrr` for
    link prediction runs (benchmarks/tune.py's WN18RR runs)."""
    for name in ("validation_accuracy", "validation_spearman", "validation_mrr"):
        if name in metrics:
            return name
    raise ValueError(f"no known main metric among {sorted(metrics)}")


def reported_metrics(metrics: dict) -> list[str]:
    """The main metric, then each of `EXTRA_METRICS` the run has."""
    return [main_metric(metrics), *(name for name in EXTRA_METRICS if defined(metrics.get(name)))]


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
    return chosen_runs(runs)


def chosen_runs(runs: list[dict]) -> list[dict]:
    """`runs` without the tuning runs (`benchmarks/tune.py`: a `tuning` record) off each arm's chosen setting. A tuned
    arm's setting is chosen as `benchmarks/tune.py` chooses it: the seed-0 selection run with the best defined main
    metric over the grid its run files record (without one, the settings its selection runs trained at, smaller
    first), ties to the earlier setting, once every setting of the grid has run; only the runs at that setting count,
    and only once a final run trained at it (an arm whose selection is incomplete, or whose final runs are still to
    come, has none; final runs at another setting never count). Runs without `tuning` pass. Runs of one arm recording
    different grids are a ValueError."""
    arms: dict = defaultdict(list)
    for run in runs:
        if "tuning" in run:
            arms[run["comparison"], run["arm"], run["dataset"]].append(run)
    chosen = {}
    for key, group in arms.items():
        recorded = group[0]["tuning"].get("grid")
        ran = {json.dumps(r["tuning"]["setting"], sort_keys=True) for r in group if r["tuning"]["stage"] == "select"}
        grid = recorded or sorted((json.loads(s) for s in ran), key=lambda s: sorted(s.items()))
        if any(r["tuning"].get("grid") != recorded for r in group):
            raise ValueError(f"the tuning runs of arm {key[1]!r} of {key[0]!r} on {key[2]!r} record different grids.")
        scores = {}
        for r in group:
            if r["tuning"]["stage"] == "select" and r["seed"] == 0 and r["tuning"]["setting"] in grid:
                value = r["metrics"].get(main_metric(r["metrics"]))
                scores[grid.index(r["tuning"]["setting"])] = value if defined(value) else None
        ranked = [(score, -i) for i, score in scores.items() if score is not None]
        if len(scores) < len(grid) or not ranked:
            continue
        setting = grid[-max(ranked)[1]]
        if any(r["tuning"]["stage"] == "final" and r["tuning"]["setting"] == setting for r in group):
            chosen[key] = setting
    return [
        r
        for r in runs
        if "tuning" not in r or chosen.get((r["comparison"], r["arm"], r["dataset"])) == r["tuning"]["setting"]
    ]


# What the runs of one arm must share to be averaged over seeds.
SHARED_BY_ARM = ("model", "config_overrides", "baseline", "profile", "backbone", "train_args")


def check_runs(runs: list[dict]) -> None:
    """A ValueError, naming the arm, unless the runs of each arm (comparison, data set, arm label) are one run per
    seed that share `SHARED_BY_ARM` (the same training on the same backbone and profile) and each comparison and data
    set has one baseline arm: otherwise its mean would pool unlike runs, count a seed twice or compare against an
    arbitrary baseline."""
    first: dict = {}
    baselines: dict = {}
    for run in runs:
        key = (run["comparison"], run["dataset"], run["arm"])
        where = f"arm {run['arm']!r} of comparison {run['comparison']!r} on {run['dataset']!r}"
        other = first.setdefault(key, {}).setdefault(run["seed"], run)
        if other is not run:
            raise ValueError(f"{where}: two run files of seed {run['seed']} (keep one).")
        some = next(iter(first[key].values()))
        for name in SHARED_BY_ARM:
            if run.get(name) != some.get(name):
                raise ValueError(
                    f"{where}: its seed-{some['seed']} and seed-{run['seed']} runs differ in {name} "
                    f"({some.get(name)!r} vs {run.get(name)!r}); runs of one arm are averaged only when they share it."
                )
        if run["baseline"]:
            base = baselines.setdefault(key[:2], run["arm"])
            if base != run["arm"]:
                raise ValueError(
                    f"comparison {run['comparison']!r} on {run['dataset']!r} has two baseline arms, {base!r} and "
                    f"{run['arm']!r}."
                )


def summarise(runs: list[dict]) -> list[dict]:
    """One row per (comparison, dataset, arm, reported metric): mean/std over the seeds where the metric is defined
    (`undefined_seeds`: those where it is not) and the delta against the baseline arm on the same metric; `main`
    marks the main metric's rows. Runs that cannot be averaged (`check_runs`) and a main metric undefined at every
    seed of an arm are a ValueError."""
    check_runs(runs)
    groups: dict = defaultdict(list)
    order: dict = {}
    for run in runs:
        for metric in reported_metrics(run["metrics"]):
            key = (run["comparison"], run["dataset"], run["arm"], metric)
            groups[key].append(run)
            order.setdefault(key, len(order))
    rows = []
    for key in sorted(groups, key=order.get):
        group, metric = sorted(groups[key], key=lambda r: r["seed"]), key[3]
        measured = [r for r in group if defined(r["metrics"][metric])]
        if not measured:
            raise ValueError(
                f"arm {key[2]!r} of comparison {key[0]!r} on {key[1]!r}: {metric} is undefined at every seed "
                f"{[r['seed'] for r in group]}, so it has no mean."
            )
        values = [r["metrics"][metric] for r in measured]
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
                "seeds": [r["seed"] for r in measured],
                "undefined_seeds": [r["seed"] for r in group if not defined(r["metrics"][metric])],
                "values": values,
                "mean": statistics.mean(values),
                "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                "wall_seconds": sum(r["wall_seconds"] for r in group),
                "profile": group[0]["profile"],
                "backbone": group[0]["backbone"],
                "adapted": bool(group[0].get("adaptation")),
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


def _describing_rows(
    results_dir: Path,
    model: str,
    config: dict,
    backbone: "str | None",
    profile: "str | None",
    learning_rate: "float | None" = None,
) -> "tuple[list[dict], list[dict]]":
    """`(rows of the arm that describes the model, all rows)` of `summarise`, from the runs of `profile` (default: the
    one profile of the describing runs; several are a ValueError asking for one). The describing arm ran on
    `backbone` (when given); all rows also hold the arms that ran on a backbone adapted from it (`pairzoo.adapt_mlm`:
    the run file's `adaptation.backbone`). Among describing arms that differ only in their learning rate (a sweep),
    those run at `learning_rate` (when given and run)."""
    kind = "spearman" if config.get("num_labels", 1) == 1 else "accuracy"

    def describes(run: dict) -> bool:
        return run["model"] == model and all(config.get(k) == v for k, v in run["config_overrides"].items())

    def on_backbone(run: dict) -> bool:
        return backbone is None or run["backbone"] == backbone

    runs = [
        r for r in load_runs(results_dir) if on_backbone(r) or (r.get("adaptation") or {}).get("backbone") == backbone
    ]
    if profile is None:
        profiles = sorted(
            {
                r["profile"]
                for r in runs
                if on_backbone(r) and describes(r) and main_metric(r["metrics"]).endswith(kind)
            }
        )
        if len(profiles) > 1:
            raise ValueError(
                f"runs of {model} in {str(results_dir)!r} come from profiles {profiles}: choose one (--profile)."
            )
        profile = profiles[0] if profiles else None
    rows = summarise([r for r in runs if r["profile"] == profile])
    matching = [r for r in rows if r["main"] and r["metric"] == kind and not r["adapted"] and describes(r)]
    specific = max((len(r["config_overrides"]) for r in matching), default=0)
    matching = [r for r in matching if len(r["config_overrides"]) == specific]
    # arms of one configuration at several learning rates (a sweep): the one the model was trained with, if it ran
    same_rate = [r for r in matching if r["train_args"].get("learning_rate") == learning_rate]
    return same_rate or matching, rows


def eval_results_for(
    results_dir: Path,
    model: str,
    config: dict,
    backbone: "str | None" = None,
    profile: "str | None" = None,
    learning_rate: "float | None" = None,
) -> list[dict]:
    """`export_model(eval_results=...)` entries (mean over seeds) of the benchmark arm that describes a model.

    An arm describes the model when its registry name is `model`, its runs used `backbone` (when given) and
    `profile` (default: the only profile such runs have; more than one is a ValueError), its main metric is of the
    model's kind (Spearman for a regressor, `num_labels == 1`; accuracy for a classifier) and each of its config
    overrides equals the value in `config` (the model's config as a dict); among those, the arm with the most
    overrides (the most specific) wins; of a learning-rate sweep of that arm, the runs at `learning_rate` (the
    model's own, when given and run).
    """
    rows, _ = _describing_rows(results_dir, model, config, backbone, profile, learning_rate)
    return [
        {"dataset": r["dataset"], "split": "validation", "metrics": {f"validation_{r['metric']}": r["mean"]}}
        for r in rows
    ]


def load_peers(path: Path) -> "dict | None":
    """The peer file's `cross_encoder` entries by data set (the sentence-transformers CrossEncoder on the bundled
    MiniLM), or None when the file is absent; a file that is not of that form is a ValueError naming it."""
    if not path.is_file():
        return None
    try:
        peers = json.loads(path.read_text())["cross_encoder"]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise ValueError(f"peer file {str(path)!r} is not JSON with a 'cross_encoder' object: {err!r}") from err
    for dataset, entry in peers.items():
        missing = {"metric", "mean", "std", "seeds"} - set(entry)
        if missing:
            raise ValueError(f"peer file {str(path)!r}: cross_encoder[{dataset!r}] lacks {sorted(missing)}.")
    return peers


def described(r: dict) -> str:
    """An arm's row of `summarise` in words: its label, mean (± std over seeds) and seed count."""
    n = len(r["values"])
    return (
        f"{r['arm']} ({r['mean']:.2f} ± {r['std']:.2f}, {n} seeds)"
        if n > 1
        else f"{r['arm']} ({r['mean']:.2f}, 1 seed)"
    )


def verdict(row: dict, baseline: dict) -> str:
    """One sentence on how the arm of `row` did against its `baseline` row (same comparison, data set and metric,
    from `summarise`): beat or lost to it beyond the seed spread (|delta| > std + baseline std), matched it within
    the spread, or a single-seed difference whose spread is unknown."""
    where = f"On {row['dataset']} ({row['metric']}, comparison {row['comparison']})"
    if row["baseline"]:
        return f"{where}, this configuration is the baseline: {described(row)}."
    this, base = described(row), f"its baseline {described(baseline)}"
    if row["beyond_spread"] is None:
        return f"{where}, {this} differs from {base} by {row['delta']:+.2f}; with a single seed the spread is unknown."
    if not row["beyond_spread"]:
        return f"{where}, {this} matched {base} within the seed spread (delta {row['delta']:+.2f})."
    outcome = "beat" if row["delta"] > 0 else "lost to"
    return f"{where}, {this} {outcome} {base} beyond the seed spread (delta {row['delta']:+.2f})."


def comparison_arms(rows: list[dict], every_row: list[dict]) -> list[dict]:
    """Every arm of each (comparison, data set) of `rows` (the describing arm's main-metric rows of `summarise`), from
    `every_row` (the same profile's rows): `{"comparison", "dataset", "metrics", "arms"}` per pair, `metrics` the
    reported metrics in order (main first), each arm `{"arm", "this", "baseline", "adapted", "learning_rate",
    "values": {metric: {"mean", "std", "n"}}}` in the rows' order (the baseline first). It shows a configuration
    beside the comparison's other arms: the paper-exact form, controls, other learning rates and backbones."""
    tables = []
    for row in rows:
        same = [r for r in every_row if (r["comparison"], r["dataset"]) == (row["comparison"], row["dataset"])]
        arms: dict = {}
        for r in same:
            arm = arms.setdefault(
                r["arm"],
                {
                    "arm": r["arm"],
                    "this": r["arm"] == row["arm"],
                    "baseline": r["baseline"],
                    "adapted": r["adapted"],
                    "learning_rate": r["train_args"].get("learning_rate"),
                    "values": {},
                },
            )
            arm["values"][r["metric"]] = {"mean": r["mean"], "std": r["std"], "n": len(r["values"])}
        metrics = list(dict.fromkeys(r["metric"] for r in same))
        tables.append(
            {"comparison": row["comparison"], "dataset": row["dataset"], "metrics": metrics, "arms": [*arms.values()]}
        )
    return tables


def baseline_comparison(
    results_dir: Path,
    model: str,
    config: dict,
    backbone: "str | None" = None,
    profile: "str | None" = None,
    peers_path: "Path | None" = None,
    learning_rate: "float | None" = None,
) -> "dict | None":
    """The card's comparison of the arm that describes a model (`eval_results_for`) with the baseline arm of the
    same comparison (its run files say `"baseline": true`), on the same backbone, data set and profile, on the main
    metric: `{"profile", "backbone", "peers", "rows", "arms", "findings"}`, one row per (comparison, data set) with
    both arms' mean, std and seed count, the delta and `verdict`; `arms`, every arm of those comparisons and data sets
    on every reported metric (`comparison_arms`); `findings`, sentences the family computes from those rows
    (its `ModelSpec.findings`; none for most). None when no arm describes the model.

    `peers_path` (a file like `../shared/reference/peers_minilm.json`): with the file present and the runs on
    `minilm`, each row gets the sentence-transformers CrossEncoder's mean ± std for its data set and metric (None
    where the file has none) and `peers` is the file's name; a missing file, or another backbone, gives no peer column.
    """
    rows, every_row = _describing_rows(results_dir, model, config, backbone, profile, learning_rate)
    if not rows:
        return None
    peers = load_peers(peers_path) if peers_path is not None and rows[0]["backbone"] == "minilm" else None
    baselines = {(r["comparison"], r["dataset"], r["metric"]): r for r in every_row if r["baseline"]}
    table = []
    for row in rows:
        base = baselines.get((row["comparison"], row["dataset"], row["metric"]))
        if base is None:
            continue
        peer = (peers or {}).get(row["dataset"])
        table.append(
            {
                "comparison": row["comparison"],
                "dataset": row["dataset"],
                "metric": row["metric"],
                "arm": row["arm"],
                "mean": row["mean"],
                "std": row["std"],
                "n": len(row["values"]),
                "baseline_arm": base["arm"],
                "baseline_mean": base["mean"],
                "baseline_std": base["std"],
                "baseline_n": len(base["values"]),
                "delta": row["delta"],
                "verdict": verdict(row, base),
                "peer": None
                if peer is None or peer["metric"] != row["metric"]
                else {"mean": peer["mean"], "std": peer["std"], "n": len(peer["seeds"])},
            }
        )
    if not table:
        return None
    findings = get_model_spec(model).findings
    return {
        "profile": rows[0]["profile"],
        "backbone": rows[0]["backbone"],
        "peers": peers_path.name if peers is not None else None,
        "rows": table,
        "arms": comparison_arms(rows, every_row),
        "findings": findings(every_row, Path(results_dir), rows[0]["backbone"]) if findings else [],
    }


def update_model_card(
    folder: "str | Path",
    results_dir: "str | Path",
    base_model: "str | None" = None,
    profile: "str | None" = None,
    peers_path: "str | Path | None" = PEERS_PATH,
    model_index: str = "benchmark",
) -> "tuple[list[dict], dict | None]":
    """Re-render the model card (README.md) of an export folder with the comparison of the benchmark arm that
    describes its model (see `eval_results_for`) with the baseline arm (and the peer in `peers_path`, when the file
    exists) under "Intended use and limitations" (`baseline_comparison`); the repo id, task, base model, training
    recipe and framework versions the export recorded (`CARD_INPUTS_FILE`) are kept (without a repo id, the usage
    snippets load `folder` as given). The card is replaced
    atomically. Returns the results written to `model-index` and the baseline comparison (None: none attached).

    `model_index`: `"benchmark"` puts the describing arm's means over seeds into `model-index`; `"export"` keeps the
    dev numbers measured for these very weights when they were exported (`export_model(eval_results=...)`, recorded
    in `CARD_INPUTS_FILE`; an export without them is a ValueError), as `make zoo` does for its one-seed exports."""
    if model_index not in ("benchmark", "export"):
        raise ValueError(f"`model_index` must be 'benchmark' or 'export', got {model_index!r}.")
    folder = Path(folder)
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{str(config_path)!r} does not exist: not an export folder.")
    config = json.loads(config_path.read_text())
    specs = [get_model_spec(name) for name in list_models()]
    spec = next((s for s in specs if s.config_class.model_type == config.get("model_type")), None)
    if spec is None:
        raise ValueError(f"{str(config_path)!r}: model_type {config.get('model_type')!r} is not a pairzoo model.")
    inputs = read_card_inputs(folder)
    if model_index == "export" and not inputs.get("eval_results"):
        raise ValueError(
            f"{str(folder / CARD_INPUTS_FILE)!r} records no dev results of the exported weights (`eval_results`): "
            "use model_index='benchmark'."
        )
    load_runs(Path(results_dir))  # a missing or broken results folder fails before the model is loaded
    model = spec.model_class.from_pretrained(folder)
    # transformers 5's `to_dict` leaves `num_labels` out (it is derived from `id2label`); the arm's kind needs it
    config = {**model.config.to_dict(), "num_labels": model.config.num_labels}
    learning_rate = (inputs.get("training") or {}).get("learning_rate")
    query = (Path(results_dir), spec.name, config, backbone_name(model), profile)
    results = eval_results_for(*query, learning_rate) if model_index == "benchmark" else inputs["eval_results"]
    baseline = baseline_comparison(*query, None if peers_path is None else Path(peers_path), learning_rate)
    card = render_model_card(
        model,
        results,
        base_model or inputs.get("base_model"),
        repo_id=inputs.get("repo_id"),
        task=inputs.get("task"),
        training=inputs.get("training"),
        versions=inputs.get("versions"),
        baseline=baseline,
        folder=folder,
    )
    write_text_atomic(folder / "README.md", card)
    return results, baseline


__all__ = [
    "EXTRA_METRICS",
    "PEERS_PATH",
    "SHARED_BY_ARM",
    "baseline_comparison",
    "check_runs",
    "comparison_arms",
    "defined",
    "described",
    "eval_results_for",
    "load_peers",
    "load_runs",
    "main_metric",
    "reported_metrics",
    "summarise",
    "update_model_card",
    "verdict",
]
