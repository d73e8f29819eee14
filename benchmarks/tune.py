r"""Tuned comparisons: every arm of a comparison trains as long as it needs before it is compared.

At one fixed recipe a baseline can be under-trained while a method with an extra path converges faster, and the
comparison then credits the method. Here every arm of a comparison (baseline, method, control) gets the same small
grid of learning rate x epochs (`grid_for`), on top of the `cpu-full` profile's recipe (`benchmarks/quality.py`):

1. selection: each grid setting trains once at seed 0 and is scored on the dev split; the arm's setting is the one
   with the best main metric (accuracy, or Spearman), ties going to the earlier setting of the grid (the smaller
   learning rate, then the fewer epochs);
2. final: the chosen setting trains on the other seeds (the seed-0 selection run is reused as seed 0).

CSR's WN18RR link prediction (`KG_COMPARISONS`: the tri-encoder arms against the router-free tri-encoder, the
bi-encoder arms against the router-free bi-encoder) is tuned the same way, each run a `pairzoo.train_kg` subprocess at
`KG_RECIPE` (bfloat16 and batch-building workers where a GPU is present), over its learning rate and steps, selected on
dev MRR.

Selecting on seed 0's dev score and reporting the mean over seeds 0-2 on the same dev split favours every arm alike
(each gets its best setting), so the comparison between arms stays fair; the seed-0 values carry the selection's
optimism and seeds 1-2 do not.

Each run is one `pairzoo.train` subprocess, written atomically as one JSON file under `<output_dir>/runs/` (the quality
benchmark's record plus `tuning`: the grid, the stage and the setting); existing files are kept, so an interrupted
command resumes. `--workers N` trains N runs at once (`benchmarks/quality.py`'s `run_pool`); a final run starts as soon
as its arm's selection is complete, before the later arms' selection runs; `--time_budget_s S` starts no run that
could end past S seconds; `--settings "lr 0.001, 5 epochs" ...` trains only the runs at those grid settings (to fit a
run into the time left; an arm's selection still waits for its whole grid). Bad input prints one line,
`tune.py: error: ...`, and exits with status 2.
`--backbone NAME` starts every run from another backbone (default: the bundled MiniLM); run files are named without
their backbone, so each backbone has its own `--output_dir` (a folder holding another backbone's runs is refused).
`--report` writes `<output_dir>/RESULTS.md` and `summary.json`: per comparison and data set, each
arm's chosen setting and seed-0 grid, its tuned mean ± std, the verdict against the tuned baseline and, beside it,
labelled, the same arms at the peer recipe (the `cpu-full` run files on the same backbone, `--peer_recipe_dir`).

    python benchmarks/tune.py --only seaver-absa --datasets absa-laptops \
        --arms "cross-encoder (transform)" "seaver (alpha 2)" "seaver (random reweighting)"
    python benchmarks/tune.py --only siamese-re2 --datasets sick-e --list
    python benchmarks/tune.py --report --readme docs/results.md
    python benchmarks/tune.py --only csr-kg-tri csr-kg-bi --output_dir benchmarks/results/tuned-kg --workers 4
    python benchmarks/tune.py --backbone mpnet-base --output_dir benchmarks/results/tuned-mpnet --only seaver-absa
    python benchmarks/tune.py --report --output_dir benchmarks/results/tuned-mpnet \
        --peer_recipe_dir benchmarks/results/mpnet-gpu
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing pairzoo

from benchmarks.quality import (  # noqa: E402
    PROFILES,
    REPO,
    Arm,
    Comparison,
    PlannedRun,
    adapt_first,
    available_comparisons,
    base_backbone,
    check_backbone,
    child_environment,
    child_threads,
    device_label,
    environment,
    profile_arms,
    profile_train_args,
    run_id,
    run_pool,
    train_and_record,
    write_json_atomic,
)
from pairzoo.console import check_at_least, parse_flags, run_command  # noqa: E402
from pairzoo.fileio import write_text_atomic  # noqa: E402
from pairzoo.hub_cards.results import defined, main_metric  # noqa: E402
from pairzoo.zoo.csr import KG_COMPARISONS  # noqa: E402

BASE_PROFILE = "cpu-full"
KG_NAMES = frozenset(c.name for c in KG_COMPARISONS)  # the comparisons trained by `pairzoo.train_kg`
DEFAULT_OUTPUT = REPO / "benchmarks" / "results" / "tuned-cpu-full"
PEER_RECIPE_DIR = REPO / "benchmarks" / "results" / BASE_PROFILE
SEEDS = (0, 1, 2)
# Fine-tuned encoders: around the peer's learning rate 2e-5, and its 2 epochs against 5.
ENCODER_GRID = {"learning_rate": (2e-5, 5e-5, 1e-4), "num_train_epochs": (2, 5)}
# An arm trained at its own learning rate L (the Siamese hosts' 1e-3, BitFit's): L / 3, L and 3 L.
OWN_RATE_STEPS = (1 / 3, 1.0, 3.0)
# WN18RR runs (`pairzoo.train_kg`): the GPU recipe of benchmarks/quality.py's docstring, whose learning rate L and
# steps S are tuned as L / 3, L, 3 L x S, 2 S; S = 1000 so that four 2 S-step runs side by side fit one 10-minute
# call of a lent GPU.
KG_RECIPE = {"batch_size": 256, "learning_rate": 1e-4, "max_length": 64, "max_steps": 1000}
KG_METRICS = ("mrr", "hits@1", "hits@3", "hits@10")


def tuned_comparisons() -> "list[Comparison]":
    """Every comparison this checkout can tune: the benchmark's, then CSR's WN18RR ones."""
    return [*available_comparisons(), *KG_COMPARISONS]


def _own_rates(rate: float) -> tuple:
    return tuple(float(f"{rate * step:.3g}") for step in OWN_RATE_STEPS)


def grid_for(comparison: Comparison, arm: Arm, dataset: str) -> "list[dict]":
    """The settings an arm is tuned over on `dataset`, in tie-breaking order: the encoder grid, or, for an arm or
    comparison with its own learning rate L, L / 3, L, 3 L x E, 2 E, where E is the run's epochs at the base profile
    (for neighbor attention the paper's 5); for a WN18RR arm, `KG_RECIPE`'s L / 3, L, 3 L x S, 2 S steps."""
    own = {**comparison.train_args, **arm.train_args}
    if comparison in KG_COMPARISONS:
        steps = KG_RECIPE["max_steps"]
        grid = {"learning_rate": _own_rates(KG_RECIPE["learning_rate"]), "max_steps": (steps, 2 * steps)}
    elif "learning_rate" in own:
        epochs = profile_train_args(comparison, arm, PROFILES[BASE_PROFILE], dataset)["num_train_epochs"]
        grid = {"learning_rate": _own_rates(own["learning_rate"]), "num_train_epochs": (epochs, 2 * epochs)}
    else:
        grid = ENCODER_GRID
    ((length, lengths),) = ((k, v) for k, v in grid.items() if k != "learning_rate")
    return [{"learning_rate": lr, length: n} for lr in grid["learning_rate"] for n in lengths]


def _length(setting: dict) -> str:
    """How long a setting trains: `N epochs`, or `N steps` for a WN18RR run."""
    if "max_steps" in setting:
        return f"{setting['max_steps']} steps"
    return f"{setting['num_train_epochs']:g} epochs"


def setting_label(setting: dict) -> str:
    return f"lr {setting['learning_rate']:g}, {_length(setting)}"


@dataclass(frozen=True)
class TunedRun:
    """One run of the tuning plan: an arm at one grid setting and seed; `stage` is "select" or "final"."""

    comparison: Comparison
    arm: Arm
    dataset: str
    seed: int
    setting: dict
    stage: str

    @property
    def id(self) -> str:
        setting, base = self.setting, run_id(self.comparison, self.arm, self.dataset, self.seed)
        length = f"steps{setting['max_steps']}" if self.kg else f"ep{setting['num_train_epochs']:g}"
        return f"{base}__lr{setting['learning_rate']:g}__{length}"

    @property
    def kg(self) -> bool:
        """A WN18RR run, trained by `pairzoo.train_kg`."""
        return self.comparison.name in KG_NAMES

    def planned(self) -> PlannedRun:
        args = profile_train_args(self.comparison, self.arm, PROFILES[BASE_PROFILE], self.dataset) | self.setting
        return PlannedRun(self.comparison, self.arm, self.comparison.baseline, self.dataset, self.seed, args)


def select(scores: "dict[int, float | None]", grid: "list[dict]") -> "dict | None":
    """The grid setting with the highest score (`scores[i]` for `grid[i]`; None where the metric was undefined), ties
    to the earlier setting; None until every setting has a score or the grid has no defined score."""
    if len(scores) < len(grid):
        return None
    defined = [(score, -i) for i, score in scores.items() if score is not None]
    return grid[-max(defined)[1]] if defined else None


def read_run(path: Path) -> "dict | None":
    return json.loads(path.read_text()) if path.is_file() else None


def run_score(record: dict) -> "float | None":
    """A run's main dev metric (None where it was undefined: `null`, or a NaN or infinity)."""
    value = record["metrics"].get(main_metric(record["metrics"]))
    return value if defined(value) else None


def selection_scores(comparison: Comparison, arm: Arm, dataset: str, runs_dir: Path) -> "dict[int, float | None]":
    """Seed-0 scores of the arm's grid settings that have run, by grid index."""
    scores = {}
    for i, setting in enumerate(grid_for(comparison, arm, dataset)):
        record = read_run(runs_dir / f"{TunedRun(comparison, arm, dataset, 0, setting, 'select').id}.json")
        if record is not None:
            scores[i] = run_score(record)
    return scores


def plan(
    comparisons: "list[Comparison]",
    datasets: "tuple | None",
    arms: "tuple | None",
    runs_dir: Path,
    settings: "tuple | None" = None,
) -> list:
    """Per comparison, data set and arm (in the order given): the selection runs, then, once the selection is
    complete, the final runs, so an arm's final runs come before the later arms' selection runs; with `settings`
    (`setting_label`s), only the runs at those settings."""
    pairs = [
        (c, a, d)
        for c in comparisons
        for d in c.datasets
        if datasets is None or d in datasets
        for a in profile_arms(c, BASE_PROFILE)
        if arms is None or a.label in arms
    ]
    runs = []
    for c, a, d in pairs:
        runs += [TunedRun(c, a, d, 0, s, "select") for s in grid_for(c, a, d)]
        chosen = select(selection_scores(c, a, d, runs_dir), grid_for(c, a, d))
        if chosen is not None:
            runs += [TunedRun(c, a, d, seed, chosen, "final") for seed in SEEDS if seed != 0]
    return [r for r in runs if settings is None or setting_label(r.setting) in settings]


def train_kg_and_record(run: TunedRun, backbone: str, env: dict, threads: "int | None" = None) -> dict:
    """Train and evaluate a WN18RR `run` in a `pairzoo.train_kg` subprocess at `KG_RECIPE` and its setting, with
    bfloat16 and threads - 1 batch-building workers where a GPU is present, `OMP_NUM_THREADS` = `threads` when given;
    its run-file record, with dev MRR and Hits@k (x100) as the `validation_*` metrics. A subprocess that fails is a
    CalledProcessError (its messages are printed above it)."""
    from pairzoo.training.cli import has_accelerator

    args = KG_RECIPE | run.setting
    flags = [f"--{key}={value}" for key, value in args.items()]
    if has_accelerator():
        flags += ["--bf16", f"--dataloader_num_workers={max(1, (threads or os.cpu_count() or 1) - 1)}"]
    with tempfile.TemporaryDirectory(prefix="pairzoo-kg-") as scratch:
        command = [sys.executable, "-m", "pairzoo.train_kg", "--model", "csr", "--backbone", backbone, "--seed"]
        command += [str(run.seed), "--config_overrides", json.dumps(run.arm.overrides), "--output_dir", scratch]
        t0 = time.time()
        subprocess.run([*command, *flags, "--export", "False"], check=True, cwd=REPO, env=child_environment(threads))
        result = json.loads((Path(scratch) / "metrics.json").read_text())
    dev = result["dev"]
    return {
        "comparison": run.comparison.name,
        "arm": run.arm.label,
        "baseline": run.arm == run.comparison.baseline,
        "model": run.arm.model,
        "config_overrides": run.arm.overrides,
        "dataset": run.dataset,
        "split": "validation",
        "seed": run.seed,
        "profile": "tuned-kg",
        "backbone": backbone,
        "train_args": {**args, "bf16": "--bf16" in flags},
        "metrics": {f"validation_{m}": None if dev.get(m) is None else 100 * dev[m] for m in KG_METRICS},
        "train_steps": result["train_steps"],
        "wall_seconds": round(time.time() - t0, 1),
        **env,
    }


def train(run: TunedRun, backbone: str, runs_dir: Path, env: dict, threads: "int | None" = None) -> dict:
    """Train `run` on `backbone` in a `pairzoo.train` (or, for WN18RR, `pairzoo.train_kg`) subprocess and write its
    run file; its record."""
    if run.kg:
        record = train_kg_and_record(run, backbone, env, threads)
    else:
        record = train_and_record(run.planned(), BASE_PROFILE, backbone, runs_dir.parent, env, threads)
        record["profile"] = "tuned-" + BASE_PROFILE
    record["tuning"] = {
        "stage": run.stage,
        "setting": run.setting,
        "grid": grid_for(run.comparison, run.arm, run.dataset),
        "selection": "best dev main metric at seed 0, ties to the earlier grid setting",
    }
    write_json_atomic(runs_dir / f"{run.id}.json", record)
    return record


def run_all(
    comparisons: list,
    datasets: "tuple | None",
    arms: "tuple | None",
    output_dir: Path,
    backbone: str,
    workers: int = 1,
    deadline: "float | None" = None,
    settings: "tuple | None" = None,
) -> None:
    """Train every planned run (at `settings` only, when given) that has no file yet on `backbone`, `workers` at a
    time, re-planning whenever a run ends so the final runs follow the selection; no run starts that could end past
    `deadline` (`run_pool`). A SystemExit names the runs that failed; the others' files are written."""
    runs_dir = output_dir / "runs"

    def pending() -> list:
        runs = plan(comparisons, datasets, arms, runs_dir, settings)
        return [r for r in runs if not (runs_dir / f"{r.id}.json").exists()]

    adapt_first([r.planned() for r in pending() if not r.kg], backbone, output_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    threads = child_threads(workers)
    env = environment(threads)

    def job(run: TunedRun) -> None:
        t0 = time.time()
        record = train(run, backbone, runs_dir, env, threads)
        print(f"{run.id}: {run_score(record)} ({time.time() - t0:.0f} s)", flush=True)

    _, failed = run_pool(pending, job, workers, deadline=deadline)
    if failed:
        raise SystemExit(f"{len(failed)} run(s) failed (messages above): {failed}. The same command reruns them.")


# ---- report ----------------------------------------------------------------------------------------------------


def _mean_std(values: "list[float]") -> "tuple[float, float]":
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def verdict(values: "list[float]", base: "list[float]") -> str:
    """ "gain" / "loss" when the difference of means exceeds the sum of the two seed stds, "tie" within it,
    "open" while either side has fewer than 3 seeds."""
    if len(values) < len(SEEDS) or len(base) < len(SEEDS):
        return "open"
    (mean, std), (base_mean, base_std) = _mean_std(values), _mean_std(base)
    if abs(mean - base_mean) <= std + base_std:
        return "tie"
    return "gain" if mean > base_mean else "loss"


def summarise_tuned(runs: "list[dict]", peer_runs: "list[dict]") -> "list[dict]":
    """One row per (comparison, data set, arm): the seed-0 grid, the chosen setting, the tuned values over seeds, the
    verdict against the tuned baseline, and the arm at the peer recipe with its verdict against that baseline."""
    rows: dict = {}
    for run in runs:
        key = (run["comparison"], run["dataset"], run["arm"])
        row = rows.setdefault(
            key,
            {"comparison": key[0], "dataset": key[1], "arm": key[2], "baseline": run["baseline"], "grid": {}},
        )
        row["metric"] = main_metric(run["metrics"]).removeprefix("validation_")
        if run["tuning"]["stage"] == "select":
            row["grid"][setting_label(run["tuning"]["setting"])] = run_score(run)
    comparisons = {c.name: c for c in tuned_comparisons()}
    for row in rows.values():
        comparison = comparisons.get(row["comparison"])
        arm = next((a for a in comparison.arms if a.label == row["arm"]), None) if comparison else None
        if arm is None:
            raise ValueError(
                f"tuning runs of arm {row['arm']!r} of comparison {row['comparison']!r}: no such arm in this "
                "checkout's comparisons, so its grid is unknown."
            )
        grid = grid_for(comparison, arm, row["dataset"])
        labels = [setting_label(s) for s in grid]
        row["grid"] = {label: row["grid"][label] for label in labels if label in row["grid"]}  # in the grid's order
        scores = {i: row["grid"][label] for i, label in enumerate(labels) if label in row["grid"]}
        chosen = select(scores, grid)
        row["chosen"] = None if chosen is None else setting_label(chosen)
        row["values"] = {}
        for run in runs:
            same = (run["comparison"], run["dataset"], run["arm"]) == (row["comparison"], row["dataset"], row["arm"])
            if same and chosen is not None and run["tuning"]["setting"] == chosen and run_score(run) is not None:
                row["values"][run["seed"]] = run_score(run)
        row["peer_recipe"] = {
            r["seed"]: run_score(r)
            for r in peer_runs
            if (r["comparison"], r["dataset"], r["arm"]) == (row["comparison"], row["dataset"], row["arm"])
            and run_score(r) is not None
        }
    for row in rows.values():
        base = next(
            (
                b
                for b in rows.values()
                if b["baseline"] and (b["comparison"], b["dataset"]) == (row["comparison"], row["dataset"])
            ),
            None,
        )
        if row["baseline"] or base is None:
            row["verdict"] = row["peer_recipe_verdict"] = None
            continue
        row["verdict"] = verdict(list(row["values"].values()), list(base["values"].values()))
        row["peer_recipe_verdict"] = verdict(list(row["peer_recipe"].values()), list(base["peer_recipe"].values()))
    return list(rows.values())


def _cell(values: "dict[int, float]") -> str:
    if not values:
        return "—"
    mean, std = _mean_std(list(values.values()))
    seeds = ",".join(str(s) for s in sorted(values))
    return f"{mean:.2f} ± {std:.2f} (seeds {seeds})" if len(values) > 1 else f"{mean:.2f} (seed {seeds})"


def tuned_markdown(rows: "list[dict]", devices: "list[str]", backbones: "list[str]") -> str:
    """The tuned comparison tables, one per (comparison, data set); `devices`: where the runs trained, `backbones`:
    what they started from."""
    names = ", ".join(f"`{b}`" for b in backbones)
    text_rows = any(r["comparison"] not in KG_NAMES for r in rows)
    kg_rows = any(r["comparison"] in KG_NAMES for r in rows)
    recipes = []
    if text_rows:
        recipes.append("on top of the `cpu-full` recipe (batch 16, warmup 0.1, weight decay 0.01, length 128)")
    if kg_rows:
        steps = ", ".join(f"{key} {value:g}" for key, value in KG_RECIPE.items())
        recipes.append(
            f"for WN18RR (`csr-kg-*`) on top of `pairzoo.train_kg` at {steps} (bfloat16 on a GPU; dev MRR and "
            "Hits@k x100, filtered, both directions)"
        )
    peer = []
    if text_rows:
        peer.append(
            "The peer-recipe columns are the same arms at the fixed `cpu-full` recipe, labelled, for contrast."
        )
    if kg_rows:
        peer.append("WN18RR has no peer recipe: its peer-recipe columns stay empty.")
    parts = [
        f"Every arm tuned over the same grid {', and '.join(recipes)}, from backbone {names}, selected on dev at "
        "seed 0 (best main metric, ties to the smaller setting), then run at its chosen setting on seeds 0-2 "
        "(`benchmarks/tune.py`). Verdict: gain / loss when the difference of means exceeds the sum of the two seed "
        f"stds, else tie; open while a side has < 3 seeds. {' '.join(peer)} Trained on: {', '.join(devices)}."
    ]
    for key in dict.fromkeys((r["comparison"], r["dataset"]) for r in rows):
        group = [r for r in rows if (r["comparison"], r["dataset"]) == key]
        lines = [
            "| arm | seed-0 grid (dev " + group[0]["metric"] + ") | chosen | tuned | verdict vs tuned baseline "
            "| peer recipe | verdict vs peer-recipe baseline |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in sorted(group, key=lambda r: not r["baseline"]):
            grid = "; ".join(f"{k}: {'undefined' if v is None else f'{v:.2f}'}" for k, v in r["grid"].items())
            cells = [
                r["arm"] + (" (baseline)" if r["baseline"] else ""),
                grid,
                r["chosen"] or "selection incomplete",
                _cell(r["values"]),
                r["verdict"] or "—",
                _cell(r["peer_recipe"]),
                r["peer_recipe_verdict"] or "—",
            ]
            lines.append("| " + " | ".join(cells) + " |")
        parts += [f"#### {key[0]}, {key[1]}", "\n".join(lines)]
    return "\n\n".join(parts)


def load_run_files(folder: Path) -> "list[dict]":
    """The run files under `<folder>/runs/` (none when it does not exist); one that is not JSON is a ValueError naming
    it."""
    runs = []
    for path in sorted((folder / "runs").glob("*.json")):
        try:
            runs.append(json.loads(path.read_text()))
        except json.JSONDecodeError as err:
            raise ValueError(f"run file {str(path)!r} is not valid JSON: {err}") from err
    return runs


def report(output_dir: Path, readme: "Path | None", peer_recipe_dir: Path = PEER_RECIPE_DIR) -> str:
    """Write `RESULTS.md` and `summary.json` beside the run files (and the section of `readme`); returns the text. The
    peer-recipe columns come from the run files in `peer_recipe_dir` on the tuned runs' backbones."""
    from benchmarks.report import readme_with_section

    runs = load_run_files(output_dir)
    if not runs:
        raise FileNotFoundError(f"no run files under {str(output_dir / 'runs')!r}: run benchmarks/tune.py first.")
    backbones = sorted({base_backbone(r) for r in runs})
    peer_runs = [r for r in load_run_files(peer_recipe_dir) if base_backbone(r) in backbones]
    rows = summarise_tuned(runs, peer_runs)
    text = tuned_markdown(rows, sorted({device_label(r.get("hardware", {})) for r in runs}), backbones)
    write_text_atomic(output_dir / "RESULTS.md", "# Tuned comparisons\n\n" + text + "\n")
    write_text_atomic(output_dir / "summary.json", json.dumps(rows, indent=2))
    if readme is not None:
        heading = f"Results, tuned comparisons in {output_dir.name} (every arm over the same grid, selected on dev)"
        updated = readme_with_section(readme.read_text(), text, output_dir.name, heading)
        write_text_atomic(readme, updated)
    return text


# `list` is the last field: an annotation after it would read the field's default instead of the builtin.
@dataclass
class TuneArguments:
    """The flags of `benchmarks/tune.py`."""

    output_dir: str = field(default=str(DEFAULT_OUTPUT), metadata={"help": "the tuning runs' folder"})
    backbone: str | None = field(
        default=None, metadata={"help": "the backbone every run starts from (default: the cpu-full profile's)"}
    )
    only: list[str] | None = field(default=None, metadata={"help": "tune only these comparisons"})
    datasets: list[str] | None = field(default=None, metadata={"help": "of those, only these data sets"})
    arms: list[str] | None = field(default=None, metadata={"help": "of those, only these arm labels"})
    settings: list[str] | None = field(
        default=None, metadata={"help": "of those, only the runs at these grid settings, as --list writes them"}
    )
    workers: int = field(default=1, metadata={"help": "train this many runs at once, each in its own subprocess"})
    time_budget_s: int | None = field(
        default=None,
        metadata={"help": "start no run that would end past this many seconds, judged by the longest run so far"},
    )
    report: bool = field(default=False, metadata={"help": "write RESULTS.md and summary.json; train nothing"})
    readme: str | None = field(default=None, metadata={"help": "with --report: also update this file's section"})
    peer_recipe_dir: str = field(
        default=str(PEER_RECIPE_DIR),
        metadata={"help": "with --report: the same arms' run files at the fixed cpu-full recipe, for contrast"},
    )
    list: bool = field(default=False, metadata={"help": "print the planned runs, done or not; train nothing"})

    def __post_init__(self) -> None:
        check_at_least(self, 1, "workers", "time_budget_s")


def main(argv: "list[str] | None" = None) -> None:
    """Tune, list or report for `argv`; bad input is a ValueError or FileNotFoundError, raised before anything is
    written."""
    args = parse_flags(TuneArguments, argv, __doc__.split("\n")[0])
    output_dir = Path(args.output_dir)
    known = {c.name: c for c in tuned_comparisons()}
    unknown = sorted(set(args.only or ()) - set(known))
    if unknown:
        raise ValueError(f"--only: unknown comparison(s) {unknown}; known: {sorted(known)}")
    comparisons = [known[n] for n in args.only] if args.only else list(known.values())
    arms = tuple(args.arms) if args.arms else None
    labels = {a.label for c in comparisons for a in profile_arms(c, BASE_PROFILE)}
    if arms and set(arms) - labels:
        raise ValueError(f"--arms: unknown arm(s) {sorted(set(arms) - labels)}; known: {sorted(labels)}")
    if args.report:
        print(report(output_dir, None if args.readme is None else Path(args.readme), Path(args.peer_recipe_dir)))
        return
    datasets = tuple(args.datasets) if args.datasets else None
    settings = tuple(args.settings) if args.settings else None
    if settings:
        grids = {
            setting_label(s)
            for c in comparisons
            for d in c.datasets
            if datasets is None or d in datasets
            for a in profile_arms(c, BASE_PROFILE)
            if arms is None or a.label in arms
            for s in grid_for(c, a, d)
        }
        if set(settings) - grids:
            raise ValueError(f"--settings: not in the grid(s) {sorted(set(settings) - grids)}; known: {sorted(grids)}")
    backbone = args.backbone or PROFILES[BASE_PROFILE].backbone
    check_backbone(output_dir / "runs", backbone)
    if args.list:
        runs_dir = output_dir / "runs"
        for run in plan(comparisons, datasets, arms, runs_dir, settings):
            done = "done" if (runs_dir / f"{run.id}.json").exists() else "to run"
            print(f"{run.stage:6} {run.id} ({setting_label(run.setting)}): {done}")
        return
    deadline = None if args.time_budget_s is None else time.time() + args.time_budget_s
    run_all(comparisons, datasets, arms, output_dir, backbone, args.workers, deadline, settings)


if __name__ == "__main__":
    sys.exit(run_command("tune.py", main))
