r"""Quality benchmark: every method against its own config-off baseline, same budget and hyper-parameters, 3+ seeds.

Each (comparison, arm, data set, seed) is one run of `pairzoo.train` in a subprocess; its result is written,
atomically, as one JSON file under `<output_dir>/runs/` (config, seed, metrics, wall time, hardware, package versions,
git commit). Existing files are kept, so an interrupted benchmark resumes where it stopped (`--force` reruns). A run
that fails writes no file: its messages are printed, the grid goes on, and the command ends with a SystemExit naming
the failed runs (the same command then reruns only those). `benchmarks/report.py` turns the files into the Markdown
table, the bar chart and the README's "Results" section.

`--list` prints the planned runs (id, epochs, training rows, done or not) without training. `--workers N` trains N
runs at once (a `concurrent.futures` pool; for one GPU that a single small run leaves mostly idle), each subprocess
with `OMP_NUM_THREADS` = cores / N unless it is set; the task-adaptive MLM steps the runs need are done first.
`--max_runs N` starts no run once N are trained or training, and `--time_budget_s S` starts no run that would end past
S seconds (judged by the longest run so far), for a lent GPU whose time is counted.

The profiles, their training recipes and the order of their runs are data: `benchmarks/grid.toml` (read and checked
by `benchmarks/grid.py`), which also says which training arguments a run gets. Each method's comparisons and arms are
in its module of `pairzoo.zoo` (`ModelSpec.comparisons`). An arm or comparison with `profiles` runs only in those
profiles, so the peer profiles' own arms leave the earlier profiles' run ids as they were. An arm whose config
overrides its model's config does not take (an option not in this checkout) is refused before anything trains, since
the config would keep it as an inert attribute; `--list` names such arms. So is a plan whose runs still to run would
read a data file that is not in the data folder (`pairzoo.training.data.resolve_data_dir`: `$PAIRZOO_DATA_DIR`, else
`../shared/data`): each run's train and validation splits and, for the runs that score expressiveness, the dev splits
`expressiveness_evaluations` reads (`missing_data`); the refusal names each data set, split and missing path, and
`--list` prints them as `#` lines. Bad input prints one line, `quality.py: error: ...`, and exits with status 2.

Neighbor attention's runs also score the decoded [MASK] state (Recall@20, Precision@20; `expressiveness_metrics`) on
their dev split and, when trained on SICK-E, on the first `esnli_rows` e-SNLI dev rows of the profile; the report
lists these as extra rows next to accuracy.

    python benchmarks/quality.py --profile cpu-small --output_dir benchmarks/results/cpu-small
    python benchmarks/quality.py --profile full --backbone roberta-base --only comateformer
    python benchmarks/quality.py --profile cpu-full --list
    python benchmarks/quality.py --profile cpu-full --only comateformer --datasets stsb --seeds 0 --max_runs 2
    python benchmarks/quality.py --profile cpu-full --only comateformer --arms "plain backbone" "comateformer (mix)"
    python benchmarks/quality.py --profile gpu
    python benchmarks/quality.py --profile gpu --workers 4 --time_budget_s 450

The GPU profile's WN18RR link prediction (CSR) runs through `pairzoo.train_kg`, not this script:
tri-encoder (hadamard) with and without the router, the paper's router-only tri-encoder, bi-encoder, seeds 0-2,
1,500 steps of batch 256 at lr 1e-4 (about 2.2 epochs of the 173,670 training rows with their inverses), all 3,034
dev triples. Measured: on an H200 (2026-11-26, `benchmarks/results/gpu-kg-h200-330s`) four runs side by side train
about 4.5 steps a second each, building batches in the training process; on an H100 (2026-11-26,
`benchmarks/results/gpu-kg-h100-430s`) nine runs side by side, each with one batch-building worker, kept the GPU at
100 % and trained about 21 steps a second in all (tri-encoder 2.2-2.3 each, bi-encoder 2.6), so the GPU, not the
collator (about 0.12 s of one CPU core for a 256-row batch), is the limit there. One seed's four arms (6,000 steps)
then take about 5 minutes with the evaluations, three seeds about 15; `--max_train_seconds` bounds a run that is
slower. The runs below build batches in 3 worker processes each (`--dataloader_num_workers`; 12 of the machine's 16
cores). Resumable (a run with a `metrics.json` is skipped); then
`python benchmarks/report.py --kg_dir benchmarks/results/gpu-kg` writes their table:

    S=0  # the seed; then 1 and 2
    for arm in 'tri-hadamard {"architecture":"tri","use_router":false,"tri_head":"hadamard"}' \
        'tri-router {"architecture":"tri"}' 'tri-hadamard-router {"architecture":"tri","tri_head":"hadamard"}' \
        'bi {"architecture":"bi","use_router":false}'; do set -- $arm; d=benchmarks/results/gpu-kg/$1__seed$S
      [ -f $d/metrics.json ] || { mkdir -p $d; python -m pairzoo.train_kg --model csr --backbone minilm --bf16 \
        --config_overrides "$2" --batch_size 256 --learning_rate 1e-4 --max_length 64 --max_steps 1500 \
        --max_train_seconds 420 --dataloader_num_workers 3 --export False --seed $S --output_dir $d \
        > $d/run.log 2>&1 & }; done; wait
"""

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing pairzoo

from benchmarks.grid import GRID_FILE, Profile, load_grid  # noqa: E402
from pairzoo.console import check_at_least, parse_flags, run_command  # noqa: E402
from pairzoo.fileio import write_text_atomic  # noqa: E402
from pairzoo.zoo import MODEL_SPECS, PEER_PROFILES, Arm, Comparison  # noqa: E402

# Every method's comparisons, from its module of `pairzoo.zoo` (its arms name the profiles of the grid that run them).
COMPARISONS = [comparison for spec in MODEL_SPECS for comparison in spec.comparisons]
GRID = load_grid(GRID_FILE, COMPARISONS)
PROFILES = GRID.profiles
TRAIN_ROWS = GRID.train_rows
ADAPTATION = GRID.adaptation  # the task-adaptive MLM step's `pairzoo.adapt_mlm` flags


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
        # result files written while a benchmark runs are not code: they do not make the checkout dirty
        status = ["git", "status", "--porcelain", "--", ".", ":(exclude)benchmarks/results"]
        dirty = subprocess.run(status, cwd=REPO, capture_output=True, text=True).stdout
        return out.stdout.strip() + ("-dirty" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def float32_matmul() -> "str | None":
    """How CUDA runs float32 matrix products in this process and the runs it starts: "tf32" where TensorFloat-32 is
    allowed (`torch.set_float32_matmul_precision` below "highest", or `TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1`), else
    "float32"; None without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return None
    override = os.environ.get("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE") == "1"
    return "tf32" if override or torch.get_float32_matmul_precision() != "highest" else "float32"


def device_label(hardware: dict, cpu: str = "CPU") -> str:
    """Where a run trained, from its run file's `hardware`: the GPU's name (saying so where its float32 matrix products
    ran as TF32), or `cpu`."""
    name = hardware.get("cuda") or cpu
    return name + (" (float32 with TF32 matrix products)" if hardware.get("float32_matmul") == "tf32" else "")


def environment(threads: "int | None" = None) -> dict:
    """Hardware and package versions, stored in every result file; `threads`: the torch threads of the training
    subprocesses (None: this process's)."""
    import torch
    import transformers

    hardware = {
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": threads or torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "float32_matmul": float32_matmul(),
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


def unknown_overrides(arm: Arm) -> list[str]:
    """The config overrides of `arm` that its model's config class does not take as parameters in this checkout
    (a config would keep them as inert attributes, and the run would silently train another model)."""
    import inspect

    from pairzoo.registry import get_model_spec

    parameters = inspect.signature(get_model_spec(arm.model).config_class.__init__).parameters
    return sorted(set(arm.overrides) - set(parameters))


def profile_datasets(comparison: Comparison, profile: Profile) -> tuple:
    """The data sets a profile without `stages` runs `comparison` on: all, or with `home_dataset_only` the first."""
    return comparison.datasets[:1] if profile.home_dataset_only else comparison.datasets


def profile_arms(comparison: Comparison, name: str) -> tuple:
    """The arms of `comparison` that profile `name` runs (the first is their baseline)."""
    return tuple(arm for arm in comparison.arms if arm.profiles is None or name in arm.profiles)


def profile_stages(name: str, comparisons: "list[Comparison] | None" = None) -> list[list[tuple]]:
    """The (comparison, data sets) pairs profile `name` runs, in stages: its `stages` (pairs whose comparison is not
    among `comparisons`, default `available_comparisons()`, left out), or one stage of every comparison that runs in
    the profile, on `profile_datasets`."""
    profile = PROFILES[name]
    comparisons = available_comparisons() if comparisons is None else comparisons
    if profile.stages is None:
        chosen = [c for c in comparisons if c.profiles is None or name in c.profiles]
        return [[(c, profile_datasets(c, profile)) for c in chosen]]
    selected = {c.name: c for c in comparisons}
    return [[(selected[c], d) for c, d in stage.pairs if c in selected] for stage in profile.stages]


def profile_train_args(
    comparison: Comparison, arm: Arm, profile: Profile, dataset: "str | None" = None, cuda: bool = False
) -> dict:
    """Training arguments of one run: the profile's, its `dataset_args` of `dataset`, its `comparison_args` of the
    comparison, the comparison's, the arm's (later ones win), and with `cuda` the profile's `cuda_args`; the profile's
    `max_epochs` caps the result."""
    dataset_args = profile.dataset_args.get(dataset, {})
    comparison_args = profile.comparison_args.get(comparison.name, {})
    args = {**profile.args, **dataset_args, **comparison_args, **comparison.train_args, **arm.train_args}
    if cuda:
        args |= profile.cuda_args
    if profile.max_epochs is not None:
        args["num_train_epochs"] = min(args["num_train_epochs"], profile.max_epochs)
    return args


@dataclass(frozen=True)
class PlannedRun:
    """One run of a profile's plan, with its resolved training arguments."""

    comparison: Comparison
    arm: Arm
    baseline: Arm
    dataset: str
    seed: int
    train_args: dict

    @property
    def id(self) -> str:
        return run_id(self.comparison, self.arm, self.dataset, self.seed)


def plan_runs(
    name: str,
    seeds: tuple,
    comparisons: "list[Comparison] | None" = None,
    datasets: "tuple | None" = None,
    cuda: bool = False,
) -> list[PlannedRun]:
    """The runs of profile `name` in the order they run: stage by stage; within a stage seed-major for profiles
    with `stages` (every arm on seed 0 first, so a partial grid stays balanced), else comparison by comparison. A
    stage with `first_seeds` N runs only the first N of `seeds`. `comparisons` and `datasets` select (default:
    all)."""
    profile = PROFILES[name]
    stages = profile_stages(name, comparisons)
    counts = [None] if profile.stages is None else [stage.first_seeds for stage in profile.stages]
    runs = []
    for stage, count in zip(stages, counts):
        pairs = [(c, d) for c, ds in stage for d in ds if datasets is None or d in datasets]
        if profile.stages is not None:
            order = [(c, d, s) for s in seeds[:count] for c, d in pairs]
        else:
            order = [(c, d, s) for c, d in pairs for s in seeds]
        for comparison, dataset, seed in order:
            arms = profile_arms(comparison, name)
            for arm in arms:
                args = profile_train_args(comparison, arm, profile, dataset, cuda)
                runs.append(PlannedRun(comparison, arm, arms[0], dataset, seed, args))
    return runs


def planned_rows(dataset: str, args: dict) -> "int | None":
    """Training rows of a run (`TRAIN_ROWS` under the run's `max_train_samples`); None where unknown."""
    full = args.get("synthetic_train_size", 2000) if dataset == "synthetic" else TRAIN_ROWS.get(dataset)
    cap = args.get("max_train_samples")
    return cap if full is None else min(full, cap or full)


def unknown_arm_overrides(runs: list[PlannedRun]) -> dict:
    """`unknown_overrides` of the arms of `runs` that have any, by `comparison / arm` label."""
    arms = {f"{r.comparison.name} / {r.arm.label}": r.arm for r in runs}
    return {label: unknown_overrides(arm) for label, arm in arms.items() if unknown_overrides(arm)}


def run_data(run: PlannedRun) -> list[tuple]:
    """(data set, split, what reads it) of each split `run` reads: its data set's train split (training, and the
    task-adaptive MLM step of an `adapted` arm) and validation split (evaluation) and, when its comparison scores
    expressiveness, the validation splits of `expressiveness_evaluations` (for SICK-E, e-SNLI's)."""
    needs = [(run.dataset, "train", "training"), (run.dataset, "validation", "evaluation")]
    if run.comparison.expressiveness:
        for name, _, _ in expressiveness_evaluations(run.dataset, run.train_args, None).values():
            needs.append((name, "validation", "[MASK] expressiveness"))
    return needs


def missing_data(runs: list[PlannedRun]) -> list[str]:
    """The pre-flight check of the data `runs` read (`run_data`), before anything trains: one line per (data set,
    split) whose files are not in the data folder (`resolve_data_dir`) or that cannot be read at all, naming the
    split, the data set, the missing paths, what reads them and how many runs (the first by id); one line for all
    when some run needs the data folder and there is none. Empty when everything is there."""
    from pairzoo.training.data import dataset_files, resolve_data_dir

    needs: dict = {}  # (data set, split) -> ({what reads it: None}, {run id: None}), in plan order
    for run in runs:
        for dataset, split, purpose in run_data(run):
            purposes, ids = needs.setdefault((dataset, split), ({}, {}))
            purposes[purpose], ids[run.id] = None, None
    problems, without_folder, data_dir = [], [], None
    for (dataset, split), (purposes, ids) in needs.items():
        count = f"{len(ids)} run{'s' if len(ids) > 1 else ''}"
        readers = f"read for {' and '.join(purposes)} by {count}, first {next(iter(ids))}"
        try:
            rels = dataset_files(dataset, split)
        except ValueError as err:
            problems.append(f"split {split!r} of {dataset!r}: {str(err).rstrip('.')} ({readers})")
            continue
        if not rels:
            continue
        if data_dir is None:
            try:
                data_dir = resolve_data_dir()
            except FileNotFoundError as err:
                without_folder.append(f"{dataset!r} {split}")
                folder_error = str(err).rstrip(".")
                continue
        missing = [repr(str(data_dir / rel)) for rel in rels if not (data_dir / rel).is_file()]
        if missing:
            verb = "is" if len(missing) == 1 else "are"
            problems.append(
                f"split {split!r} of {dataset!r} needs {', '.join(missing)}, which {verb} missing ({readers})"
            )
    if without_folder:
        problems.append(f"no data folder for {', '.join(without_folder)}: {folder_error}")
    return problems


def print_plan(runs: list[PlannedRun], runs_dir: Path, missing: "list[str]" = ()) -> None:
    """`--list`: one line per planned run (id, epochs, training rows, done or to run), a `#` line per arm whose
    config overrides this checkout does not know and per `missing` data (`missing_data`), then the counts and the
    training examples (rows x epochs) still to run."""
    done = todo = examples = 0
    for run in runs:
        exists = (runs_dir / f"{run.id}.json").exists()
        epochs = run.train_args["num_train_epochs"]
        rows = planned_rows(run.dataset, run.train_args)
        print(f"{run.id}  epochs={epochs}  rows={rows if rows is not None else '?'}  {'done' if exists else 'to run'}")
        done += exists
        if not exists:
            todo += 1
            examples += (rows or 0) * epochs
    for label, names in unknown_arm_overrides(runs).items():
        print(f"# {label!r}: {names} are not config parameters in this checkout")
    for line in missing:
        print(f"# missing data: {line}")
    print(f"{len(runs)} runs planned: {done} done, {todo} to run ({examples:,} training examples, rows x epochs)")


def run_id(comparison: Comparison, arm: Arm, dataset: str, seed: int) -> str:
    return f"{comparison.name}__{arm.file_label}__{dataset}__seed{seed}"


def train_argv(
    arm: Arm, dataset: str, seed: int, args: dict, backbone: str, output_dir: Path, export: bool = False
) -> list[str]:
    """`pairzoo.train` flags of one run; `export` keeps the trained model in `<output_dir>/export`."""
    argv = ["--model", arm.model, "--backbone", backbone, "--dataset", dataset, "--seed", str(seed)]
    argv += ["--config_overrides", json.dumps(arm.overrides), "--output_dir", str(output_dir)]
    for key, value in args.items():
        argv += [f"--{key}", str(value)]
    return argv + ["--eval_strategy", "no", "--save_strategy", "no", "--export", str(export), "--report_to", "none"]


def adapted_backbone(backbone: str, dataset: str, output_dir: Path) -> Path:
    """`backbone` after the task-adaptive MLM step on `dataset`'s training sentences (`ADAPTATION`), the folder
    `<output_dir>/adapted/<backbone>__<dataset>` (ignored by git); `pairzoo.adapt_mlm` writes it when it is missing.
    It writes the folder under a temporary name and renames it into place, so a folder that exists is complete: every
    seed and arm of the output folder reuses it."""
    from pairzoo.adapt_mlm import ADAPTATION_FILE
    from pairzoo.adapt_mlm import main as adapt_main

    slug = "".join(ch if ch.isalnum() else "-" for ch in Path(backbone).name)
    folder = output_dir / "adapted" / f"{slug}__{dataset}"
    if not (folder / ADAPTATION_FILE).exists():
        flags = [f"--{key}={value}" for key, value in ADAPTATION.items()]
        if adapt_main(["--dataset", dataset, "--backbone", backbone, "--output_dir", str(folder), *flags]):
            raise SystemExit(f"the task-adaptive MLM step of {backbone!r} on {dataset!r} failed (message above).")
    return folder


def expressiveness_evaluations(dataset: str, args: dict, esnli_rows: "int | None") -> dict:
    """What `expressiveness_metrics` scores after a run on `dataset`: metric prefix -> (data set whose `validation`
    split it reads, keyword source, row limit): the run's own dev rows and, for SICK-E, e-SNLI dev (`snli`)."""
    evaluations = {"validation": (dataset, "pair", args.get("max_eval_samples"))}
    if dataset == "sick-e":
        evaluations["esnli"] = ("snli", "esnli-proxy", esnli_rows)
    return evaluations


def expressiveness_metrics(export_dir: Path, dataset: str, args: dict, esnli_rows: "int | None") -> dict:
    """Recall@20 and Precision@20 of the trained model's decoded [MASK] states: on the dev rows the run was
    scored on (keywords: the pair's content words) and, for SICK-E, on the first `esnli_rows` e-SNLI dev rows
    (keywords: content words shared by an explanation and the pair; a proxy for the official highlights)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from pairzoo.training.data import load_dataset
    from pairzoo.training.expressiveness import evaluate_expressiveness

    model = AutoModelForSequenceClassification.from_pretrained(export_dir)
    model.to("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = AutoTokenizer.from_pretrained(export_dir)
    length = int(args.get("max_length", 128))
    metrics = {}
    for prefix, (name, keywords, limit) in expressiveness_evaluations(dataset, args, esnli_rows).items():
        # split= makes a missing file the loader's FileNotFoundError naming it (not a DatasetDict without the split)
        rows = [dict(r) for r in load_dataset(name, split="validation")["validation"]]
        rows = rows[: int(limit)] if limit is not None else rows
        result = evaluate_expressiveness(model, tokenizer, rows, keywords, k=20, max_length=length)
        metrics[f"{prefix}_recall@20"] = result["recall@20"]
        metrics[f"{prefix}_precision@20"] = result["precision@20"]
        metrics[f"{prefix}_keyword_examples"] = result["examples_with_keywords"]
    return metrics


def adapt_first(runs: list[PlannedRun], backbone: str, output_dir: Path) -> None:
    """Do the task-adaptive MLM step of each data set that an `adapted` arm of `runs` trains on (`adapted_backbone`),
    one at a time, before any run starts: runs side by side then find their backbone written."""
    for dataset in dict.fromkeys(run.dataset for run in runs if run.arm.adapted):
        adapted_backbone(backbone, dataset, output_dir)


def child_threads(workers: int) -> "int | None":
    """The `OMP_NUM_THREADS` to give each training subprocess when `workers` train at once: cores / workers; None
    (the subprocesses inherit this process's) when the variable is set or one trains at a time."""
    if "OMP_NUM_THREADS" in os.environ or workers == 1:
        return None
    return max(1, (os.cpu_count() or 1) // workers)


def child_environment(threads: "int | None" = None) -> dict:
    """This process's environment for a training subprocess, with `OMP_NUM_THREADS` = `threads` when given."""
    return dict(os.environ) if threads is None else {**os.environ, "OMP_NUM_THREADS": str(threads)}


def run_one(argv: list[str], launcher: str, output_dir: Path, threads: "int | None" = None) -> dict:
    """Train and evaluate once in a `pairzoo.train` subprocess (`launcher` "python": `python -m pairzoo.train`,
    "accelerate": `accelerate launch -m pairzoo.train`), with `OMP_NUM_THREADS` = `threads` when given; the validation
    metrics it wrote to `<output_dir>/metrics.json`. A subprocess that fails is a CalledProcessError (its messages are
    printed above it)."""
    module = ["-m", "pairzoo.train", *argv, "--disable_tqdm", "True"]
    command = [sys.executable, *module] if launcher == "python" else ["accelerate", "launch", *module]
    subprocess.run(command, check=True, cwd=REPO, env=child_environment(threads))
    return json.loads((output_dir / "metrics.json").read_text())["metrics"]


def train_and_record(
    run: PlannedRun, profile_name: str, backbone: str, output_dir: Path, env: dict, threads: "int | None" = None
) -> dict:
    """Train and evaluate `run` (`run_one`; after its task-adaptive MLM step, when the arm needs one); its run-file
    record."""
    profile = PROFILES[profile_name]
    comparison, arm, dataset, seed, train_args = run.comparison, run.arm, run.dataset, run.seed, run.train_args
    run_backbone, adaptation = backbone, None
    if arm.adapted:
        folder = adapted_backbone(backbone, dataset, output_dir)
        run_backbone, adaptation = str(folder), json.loads((folder / "adaptation.json").read_text())
    with tempfile.TemporaryDirectory(prefix="pairzoo-bench-") as scratch:
        scratch = Path(scratch)
        run_argv = train_argv(arm, dataset, seed, train_args, run_backbone, scratch, comparison.expressiveness)
        t0 = time.time()
        metrics = run_one(run_argv, profile.launcher, scratch, threads)
        if comparison.expressiveness:
            metrics |= expressiveness_metrics(scratch / "export", dataset, train_args, profile.esnli_rows)
    return {
        "comparison": comparison.name,
        "arm": arm.label,
        "baseline": arm == run.baseline,
        "model": arm.model,
        "config_overrides": arm.overrides,
        "dataset": dataset,
        "split": "validation",
        "seed": seed,
        "profile": profile_name,
        "backbone": run_backbone,
        **({"adaptation": adaptation} if adaptation is not None else {}),
        "train_args": train_args,
        "metrics": metrics,
        "wall_seconds": round(time.time() - t0, 1),
        **env,
    }


def base_backbone(record: dict) -> str:
    """The backbone a run file's run started from, as it was named: before any task-adaptive MLM step."""
    return record.get("adaptation", {}).get("backbone", record["backbone"])


def check_backbone(runs_dir: Path, backbone: str) -> None:
    """A ValueError when `runs_dir` holds a run file of another backbone than `backbone`: run files are named without
    their backbone, so that folder's runs would count as done for this one's."""
    for path in sorted(runs_dir.glob("*.json")):
        try:
            other = base_backbone(json.loads(path.read_text()))
        except (json.JSONDecodeError, KeyError, AttributeError):  # not a run file: the report names it
            continue
        if other != backbone:
            raise ValueError(
                f"--backbone {backbone}: {str(runs_dir)!r} holds runs on {other!r} ({path.name}); run files are named "
                "without their backbone, so give this backbone its own --output_dir."
            )


def write_json_atomic(path: Path, payload: dict) -> None:
    """`payload` as indented JSON, written atomically (`write_text_atomic`)."""
    write_text_atomic(path, json.dumps(payload, indent=2, default=str))


def run_pool(
    next_runs: Callable[[], list],
    train: Callable,
    workers: int = 1,
    max_runs: "int | None" = None,
    deadline: "float | None" = None,
) -> "tuple[int, list[str]]":
    """Train runs `workers` at a time, `train(run)` in a thread of a `ThreadPoolExecutor` (it trains in a subprocess
    and writes the run's file). `next_runs()` gives the runs still to train, in order (anything with an `id`); it is
    asked again whenever a run ends, so a plan can grow with the results, and the runs training, trained or failed in
    this call are skipped. No run starts once `max_runs` are trained or training, nor when it could end past
    `deadline` (a `time.time()`), judged by the longest run so far. A run whose `train` raises is printed with its
    traceback and counted as failed; the others go on. Returns the number of runs trained and the failed runs' ids."""
    trained, failed, longest, running = [], [], 0.0, {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        while True:
            skip = {*trained, *failed, *(run.id for run, _ in running.values())}
            queue = [run for run in next_runs() if run.id not in skip]
            stop = None
            while queue and len(running) < workers and stop is None:
                if max_runs is not None and len(trained) + len(running) >= max_runs:
                    stop = " (--max_runs)"
                elif deadline is not None and time.time() + longest > deadline:
                    stop = ": the next could end past --time_budget_s"
                else:
                    run = queue.pop(0)
                    running[pool.submit(train, run)] = (run, time.time())
            if not running:
                if stop is not None:
                    print(f"stopped after {len(trained)} runs{stop}", flush=True)
                return len(trained), failed
            for future in wait(running, return_when=FIRST_COMPLETED).done:
                run, begun = running.pop(future)
                error = future.exception()
                if error is None:
                    trained.append(run.id)
                    longest = max(longest, time.time() - begun)
                else:  # one arm's bug must not cost the rest of the grid (a lent GPU's minutes)
                    traceback.print_exception(error)
                    print(f"FAILED {run.id}: no run file written; the grid goes on", flush=True)
                    failed.append(run.id)


# `list` is the last field: an annotation after it would read the field's default instead of the builtin.
@dataclass
class QualityArguments:
    """The flags of `benchmarks/quality.py`."""

    profile: str = field(
        default="cpu-small", metadata={"choices": sorted(PROFILES), "help": f"a profile of {GRID_FILE.name}"}
    )
    output_dir: str | None = field(default=None, metadata={"help": "None: benchmarks/results/<profile>"})
    backbone: str | None = field(default=None, metadata={"help": "override the profile's backbone"})
    seeds: list[int] | None = field(default=None, metadata={"help": "override the profile's seeds"})
    only: list[str] | None = field(default=None, metadata={"help": "run only these comparisons"})
    datasets: list[str] | None = field(default=None, metadata={"help": "of those, only these data sets"})
    arms: list[str] | None = field(default=None, metadata={"help": "of those, only the arms with these labels"})
    force: bool = field(default=False, metadata={"help": "rerun runs whose result file exists"})
    max_runs: int | None = field(
        default=None, metadata={"help": "start no run once this many are trained or training"}
    )
    time_budget_s: int | None = field(
        default=None,
        metadata={"help": "start no run that would end past this many seconds, judged by the longest run so far"},
    )
    workers: int = field(default=1, metadata={"help": "train this many runs at once, each in its own subprocess"})
    list: bool = field(default=False, metadata={"help": "print the planned runs and counts; train nothing"})

    def __post_init__(self) -> None:
        check_at_least(self, 1, "max_runs", "time_budget_s", "workers")


def main(argv: "list[str] | None" = None) -> None:
    """Run the benchmark for `argv`; bad input is a ValueError or FileNotFoundError, raised before anything is
    written."""
    args = parse_flags(QualityArguments, argv, __doc__.split("\n")[0])
    profile = PROFILES[args.profile]
    output_dir = Path(args.output_dir) if args.output_dir else REPO / "benchmarks" / "results" / args.profile
    backbone = args.backbone or profile.backbone
    seeds = tuple(args.seeds or profile.seeds)
    comparisons = [c for stage in profile_stages(args.profile) for c, _ in stage]
    if args.only:
        unknown = set(args.only) - {c.name for c in comparisons}
        if unknown:
            known = [c.name for c in comparisons]
            raise ValueError(
                f"--only: unknown comparison(s) {sorted(unknown)} in profile {args.profile!r}; known: {known}"
            )
        comparisons = [c for c in comparisons if c.name in args.only]
    if args.datasets:
        planned = {d for stage in profile_stages(args.profile, comparisons) for _, ds in stage for d in ds}
        unknown = set(args.datasets) - planned
        if unknown:
            raise ValueError(f"--datasets: {sorted(unknown)} not among the selected comparisons' data sets.")
    import torch

    runs = plan_runs(
        args.profile, seeds, comparisons, args.datasets and tuple(args.datasets), torch.cuda.is_available()
    )
    if args.arms:
        unknown = set(args.arms) - {r.arm.label for r in runs}
        if unknown:
            known = sorted({r.arm.label for r in runs})
            raise ValueError(f"--arms: unknown arm label(s) {sorted(unknown)} among the selected runs; known: {known}")
        runs = [r for r in runs if r.arm.label in args.arms]
    runs_dir = output_dir / "runs"
    check_backbone(runs_dir, backbone)
    pending = [r for r in runs if args.force or not (runs_dir / f"{r.id}.json").exists()]
    if args.list:
        if profile.about:
            print(f"# {args.profile}: {profile.about}")
        print_plan(runs, runs_dir, missing_data(pending))
        return
    unknown = unknown_arm_overrides(pending)
    if unknown:
        raise ValueError(f"config_overrides this checkout's configs do not take: {unknown}; leave those arms out.")
    missing = missing_data(pending)  # before any adaptation step or run starts
    if missing:
        raise FileNotFoundError(
            f"data the runs still to run read is missing: {'; '.join(missing)}. Add it to the data folder, or leave "
            "those runs out (--only, --datasets, --arms); nothing was started."
        )
    adapt_first(pending[: args.max_runs], backbone, output_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    threads = child_threads(min(args.workers, len(pending) or 1))
    env, started = environment(threads), time.time()

    def train(run: PlannedRun) -> None:
        payload = train_and_record(run, args.profile, backbone, output_dir, env, threads)
        path = runs_dir / f"{run.id}.json"
        write_json_atomic(path, payload)
        print(f"[{time.time() - started:7.0f}s] {path.name}: {json.dumps(payload['metrics'])}", flush=True)

    deadline = None if args.time_budget_s is None else started + args.time_budget_s
    trained, failed = run_pool(lambda: pending, train, args.workers, args.max_runs, deadline)
    print(f"{trained} runs trained, done in {time.time() - started:.0f}s; results in {runs_dir}", flush=True)
    if failed:
        raise SystemExit(
            f"{len(failed)} run(s) failed (messages above), the others' run files are written: {failed}. The same "
            "command reruns only the runs without a file."
        )


__all__ = [
    "ADAPTATION",
    "Arm",
    "COMPARISONS",
    "Comparison",
    "GRID",
    "PEER_PROFILES",
    "PROFILES",
    "PlannedRun",
    "QualityArguments",
    "available_comparisons",
    "base_backbone",
    "check_backbone",
    "environment",
    "expressiveness_evaluations",
    "missing_data",
    "plan_runs",
    "profile_stages",
    "profile_train_args",
    "run_id",
    "run_pool",
]

if __name__ == "__main__":
    sys.exit(run_command("quality.py", main))
