"""Benchmark profiles and their runner: the grid file (`benchmarks/grid.toml`) resolves each profile's training
arguments and order, a bad grid file is refused naming the file and the key, the earlier profiles keep exactly their
committed run ids, `--list` / `--max_runs` / `--time_budget_s` / `--workers` plan and budget, a failing run costs only
itself, missing data and bad flags stop everything with one line, and the report puts the sentence-transformers peer
beside pairzoo's arms. Training is faked here (`run_one`); tests/test_benchmarks.py trains real tiny-bert runs."""

import dataclasses
import json
import statistics
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import quality  # noqa: E402
import report  # noqa: E402

from benchmarks.grid import GRID_FILE, Profile, load_grid  # noqa: E402
from pairzoo.console import run_command  # noqa: E402

ADAPTED_ARMS = (
    "full fine-tuning",
    "bitfit (batch-norm head)",
    "neighbor attention (batch-norm head)",
    "neighbor attention + reg (batch-norm head)",
)
REQUIRED_PAIRS = {(c, d) for c, ds in quality.GRID.groups["required"] for d in ds}
CONDITIONAL_PAIRS = {
    ("seaver", "synthetic"),
    ("seaver-absa", "absa-restaurants"),
    ("seaver-absa", "absa-laptops"),
    ("csr-tri", "synthetic"),
    ("csr-bi", "synthetic"),
}


def _run(runs: list, comparison: str, arm: str, dataset: str, seed: int = 0) -> "quality.PlannedRun":
    return next(
        r for r in runs if (r.comparison.name, r.arm.label, r.dataset, r.seed) == (comparison, arm, dataset, seed)
    )


def _comparisons(*names: str) -> list:
    return [c for c in quality.COMPARISONS if c.name in names]


def _fake_training(monkeypatch, train=None) -> list:
    """Training faked: no data checked, `train(argv)` (default: accuracy 80) instead of a `pairzoo.train` subprocess.
    Returns the (argv, threads) of each run, in the order they started."""
    calls = []

    def fake_run_one(argv: list, launcher: str, output_dir: Path, threads=None) -> dict:
        calls.append((argv, threads))
        return train(argv) if train else {"validation_accuracy": 80.0}

    monkeypatch.setattr(quality, "missing_data", lambda runs: [])
    monkeypatch.setattr(quality, "run_one", fake_run_one)
    monkeypatch.setattr(
        quality, "environment", lambda threads=None: {"hardware": {"torch_threads": threads}, "git_commit": "x"}
    )
    return calls


def _flag(argv: list, name: str) -> str:
    return argv[argv.index(name) + 1]


# --------------------------------------------------------------------------------------------- plan contents


def test_cpu_full_trains_with_the_peer_recipe_per_data_set_and_methods_keep_their_own_schedule():
    runs = quality.plan_runs("cpu-full", (0,))
    epochs = {"stsb": 1, "sick-e": 2, "mrpc": 2}  # the peer file's epochs per data set
    for arm in ("cross-encoder", "plain backbone", "comateformer (paper)", "comateformer (mix, l1)"):
        comparison = "cross-encoder" if arm == "cross-encoder" else "comateformer"
        for dataset, n in epochs.items():
            args = _run(runs, comparison, arm, dataset).train_args
            assert args == {
                "max_length": 128,
                "num_train_epochs": n,
                "per_device_train_batch_size": 16,
                "per_device_eval_batch_size": 64,
                "learning_rate": 2e-5,
                "warmup_steps": 0.1,
                "weight_decay": 0.01,
            }
    # a method's own learning rate still wins over the profile's (BitFit); neighbor attention's comparison trains the
    # paper's 5 epochs instead of the data set's 2; the Siamese hosts keep theirs, on the full split
    bitfit = _run(runs, "neighbor-attention", "bitfit", "sick-e").train_args
    assert bitfit["learning_rate"] == 1e-3 and bitfit["num_train_epochs"] == 5
    for arm in ("esim", "re2 + sfa", "drcn + sfa (residual)", "drcn + sfa (branch-sum squeeze)"):
        args = _run(runs, f"siamese-{arm.split()[0]}", arm, "sick-e").train_args
        assert args["num_train_epochs"] == 3 and args["learning_rate"] == 1e-3
        assert args["per_device_train_batch_size"] == 16 and "max_train_samples" not in args
        assert quality.planned_rows("sick-e", args) == quality.TRAIN_ROWS["sick-e"]


def test_training_arguments_take_profile_then_data_set_then_comparison_then_arm_then_cuda():
    profile = Profile(
        backbone="b",
        seeds=(0,),
        launcher="python",
        args={"learning_rate": 1.0, "num_train_epochs": 1, "weight_decay": 0.0, "max_length": 8, "warmup_steps": 0},
        dataset_args={"d": {"num_train_epochs": 2, "weight_decay": 0.5, "learning_rate": 2.0, "max_length": 16}},
        comparison_args={"c": {"max_length": 32, "learning_rate": 4.0, "weight_decay": 0.75}},
        cuda_args={"bf16": True},
    )
    arm = quality.Arm("a", "m", train_args={"weight_decay": 0.25})
    comparison = quality.Comparison("c", (arm,), ("d", "e"), {"learning_rate": 3.0})
    args = quality.profile_train_args(comparison, arm, profile, "d")
    assert args == {
        "learning_rate": 3.0,
        "num_train_epochs": 2,
        "weight_decay": 0.25,
        "max_length": 32,
        "warmup_steps": 0,
    }
    assert quality.profile_train_args(comparison, arm, profile, "e")["num_train_epochs"] == 1
    assert quality.profile_train_args(comparison, arm, profile, "d", cuda=True)["bf16"] is True
    # another comparison takes the data set's arguments, not c's; `max_epochs` caps the result
    other = quality.Comparison("o", (arm,), ("d",))
    assert quality.profile_train_args(other, arm, profile, "d") == {**args, "learning_rate": 2.0, "max_length": 16}
    capped = dataclasses.replace(profile, max_epochs=1)
    assert quality.profile_train_args(other, arm, capped, "d")["num_train_epochs"] == 1


@pytest.mark.parametrize("name", ["cpu-small", "cpu-medium"])
def test_earlier_profiles_plan_exactly_their_committed_run_ids(name):
    committed = {p.stem for p in (REPO / "benchmarks" / "results" / name / "runs").glob("*.json")}
    assert committed
    planned = [r.id for r in quality.plan_runs(name, quality.PROFILES[name].seeds)]
    assert len(planned) == len(set(planned))
    ran = {i.split("__")[0] for i in committed}  # cpu-medium has not run every comparison yet (SEAVER)
    assert {i for i in planned if i.split("__")[0] in ran} == committed
    new_arms = [a.label for c in quality.COMPARISONS for a in c.arms if a.profiles == quality.PEER_PROFILES]
    assert new_arms and not any(a for a in new_arms if any(f"__{a}__" in i for i in planned))
    assert not any(i.startswith("cross-encoder__") for i in planned)
    # cpu-small: one epoch everywhere, each comparison on its home data set only; cpu-medium: all of them
    siamese = _comparisons("siamese-esim")
    assert {r.dataset for r in quality.plan_runs(name, (0,), siamese)} == (
        {"sick-e"} if name == "cpu-small" else {"sick-e", "mrpc"}
    )
    assert quality.plan_runs(name, (0,), siamese)[0].train_args["num_train_epochs"] == (
        1 if name == "cpu-small" else 3
    )


def test_cpu_full_runs_stage_by_stage_and_seed_major_within_a_stage():
    runs = quality.plan_runs("cpu-full", (0, 1, 2))
    assert len(runs) == len({r.id for r in runs})
    in_required = [(r.comparison.name, r.dataset) in REQUIRED_PAIRS for r in runs]
    first_other = in_required.index(False)
    assert all(in_required[:first_other]) and not any(in_required[first_other:])
    seeds = [r.seed for r in runs[:first_other]]
    assert seeds == sorted(seeds) and set(seeds) == {0, 1, 2}
    per_seed = [sum(s == seed for s in seeds) for seed in (0, 1, 2)]
    arms = sum(len(quality.profile_arms(c, "cpu-full")) * len(ds) for c, ds in quality.profile_stages("cpu-full")[0])
    assert per_seed == [arms] * 3
    # the earlier profiles keep their comparison-major order
    medium = quality.plan_runs("cpu-medium", (0, 1))
    assert [r.seed for r in medium[:4]] == [0, 0, 1, 1] and medium[0].comparison.name == "seaver"


def test_gpu_profile_runs_the_required_grid_first_at_three_epochs_and_five_seeds_bf16_only_on_cuda():
    profile = quality.PROFILES["gpu"]
    assert profile.seeds == (0, 1, 2, 3, 4) and profile.launcher == "python"
    runs = quality.plan_runs("gpu", profile.seeds)
    in_required = [(r.comparison.name, r.dataset) in REQUIRED_PAIRS for r in runs]
    first_other = in_required.index(False)
    assert all(in_required[:first_other]) and not any(in_required[first_other:])
    required = runs[:first_other]
    assert {(r.comparison.name, r.dataset) for r in required} == REQUIRED_PAIRS
    seeds = [r.seed for r in required]
    assert seeds == sorted(seeds) and set(seeds) == {0, 1, 2, 3, 4}
    assert all(r.train_args["num_train_epochs"] == 3 for r in required)
    assert all(r.train_args["per_device_train_batch_size"] == 32 for r in runs)
    assert not any("bf16" in r.train_args for r in runs)
    on_cuda = quality.plan_runs("gpu", profile.seeds, cuda=True)
    assert [r.id for r in on_cuda] == [r.id for r in runs]
    assert all(r.train_args == {**plain.train_args, "bf16": True} for r, plain in zip(on_cuda, runs))


def test_gpu_profile_runs_conditional_then_neighbor_attention_after_the_required_grid_on_three_seeds():
    runs = quality.plan_runs("gpu", quality.PROFILES["gpu"].seeds)
    assert len(runs) == len({r.id for r in runs})
    later = [r for r in runs if (r.comparison.name, r.dataset) not in REQUIRED_PAIRS]
    pairs = [(r.comparison.name, r.dataset) for r in later]
    assert set(pairs) == CONDITIONAL_PAIRS | {("neighbor-attention", "sick-e")}
    first_na = pairs.index(("neighbor-attention", "sick-e"))
    assert set(pairs[:first_na]) == CONDITIONAL_PAIRS and set(pairs[first_na:]) == {("neighbor-attention", "sick-e")}
    assert {r.seed for r in later} == {0, 1, 2}  # first_seeds: the first 3 of the profile's 5
    assert [r.seed for r in later[:first_na]] == sorted(r.seed for r in later[:first_na])
    arms = {c.name: len(quality.profile_arms(c, "gpu")) for c in quality.COMPARISONS}
    assert arms["seaver"] == 3 and arms["csr-tri"] == 7 and arms["csr-bi"] == 3 and arms["seaver-absa"] == 6
    per_seed = arms["seaver"] + 2 * arms["seaver-absa"] + arms["csr-tri"] + arms["csr-bi"] + arms["neighbor-attention"]
    assert len(later) == 3 * per_seed == 3 * 40
    # synthetic: cpu-full's synthetic budget
    full = {(r.comparison.name, r.arm.label): r.train_args for r in quality.plan_runs("cpu-full", (0,))}
    for run in (r for r in later if r.dataset == "synthetic"):
        args = run.train_args
        assert args["synthetic_train_size"] == 24000 and args["learning_rate"] == 1e-4
        assert args["per_device_train_batch_size"] == 32 and args["max_length"] == 64 and args["num_train_epochs"] == 2
        assert quality.planned_rows("synthetic", args) == 24000
        assert all(args[k] == full[run.comparison.name, run.arm.label][k] for k in quality.GRID.recipes["synthetic"])
    absa = [r.train_args for r in later if r.dataset.startswith("absa-")]
    assert absa and all(a["num_train_epochs"] == 3 and a["learning_rate"] == 2e-5 for a in absa)
    # neighbor attention at the paper's 5 epochs, its arms' own learning rates kept (the required grid's SICK-E runs
    # stay at 3)
    na = {r.arm.label: r.train_args for r in later if r.comparison.name == "neighbor-attention"}
    assert len(na) == 15 and all(a["num_train_epochs"] == 5 for a in na.values())
    assert na["full fine-tuning"]["learning_rate"] == 2e-5 and na["neighbor attention"]["learning_rate"] == 1e-3
    assert {na[f"{arm} (batch-norm head)"]["learning_rate"] for arm in ("neighbor attention", "bitfit")} == {1e-3}
    # the parameter-efficient arms' learning-rate sweep, and the four arms on the task-adapted backbone
    for arm in ("neighbor attention", "bitfit"):
        rates = {rate: na[f"{arm} (batch-norm head, lr {rate})"]["learning_rate"] for rate in ("3e-3", "1e-2")}
        assert rates == {"3e-3": 3e-3, "1e-2": 1e-2}
    adapted = {r.arm.label for r in later if r.arm.adapted}
    assert adapted == {f"{arm} (adapted backbone)" for arm in ADAPTED_ARMS}
    assert all(na[f"{arm} (adapted backbone)"]["learning_rate"] == na[arm]["learning_rate"] for arm in ADAPTED_ARMS)
    sick_e = {
        r.train_args["num_train_epochs"]
        for r in runs
        if r.dataset == "sick-e" and r.comparison.name != "neighbor-attention"
    }
    assert sick_e == {3}
    # --seeds overrides the profile's seeds; a stage's cap takes the first 3 of them
    assert {r.seed for r in quality.plan_runs("gpu", (7, 8)) if r.comparison.name == "csr-bi"} == {7, 8}
    capped = {r.seed for r in quality.plan_runs("gpu", (9, 8, 7, 6)) if r.comparison.name == "seaver"}
    assert capped == {9, 8, 7}


# --------------------------------------------------------------------------------------------- the grid file


def _grid_copy(tmp_path: Path, old: str, new: str) -> Path:
    text = GRID_FILE.read_text()
    assert text.count(old) == 1, old
    path = tmp_path / "grid.toml"
    path.write_text(text.replace(old, new))
    return path


def test_a_recipe_is_changed_in_one_place_for_every_profile_that_uses_it(tmp_path):
    assert load_grid(GRID_FILE, quality.COMPARISONS) == quality.GRID
    peer = "learning_rate = 2e-5\nwarmup_steps = 0.1\nweight_decay = 0.01"
    grid = load_grid(_grid_copy(tmp_path, peer, peer.replace("2e-5", "3e-5")), quality.COMPARISONS)
    assert grid.profiles["cpu-full"].args == {**quality.PROFILES["cpu-full"].args, "learning_rate": 3e-5}
    # gpu: the peer recipe, then its own epochs and batches (later keys win, in the recipe's key order)
    assert list(grid.profiles["gpu"].args.items()) == [
        ("max_length", 128),
        ("num_train_epochs", 3),
        ("per_device_train_batch_size", 32),
        ("per_device_eval_batch_size", 256),
        ("learning_rate", 3e-5),
        ("warmup_steps", 0.1),
        ("weight_decay", 0.01),
    ]
    assert grid.profiles["cpu-small"] == quality.PROFILES["cpu-small"]
    # a data set's recipe by name: synthetic's under both peer profiles
    assert grid.profiles["gpu"].dataset_args["synthetic"] == grid.recipes["synthetic"]
    assert grid.profiles["cpu-full"].dataset_args["synthetic"]["synthetic_train_size"] == 24000


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('[profiles.full]\nbackbone = "minilm"', '[profiles.full]\nlr = 1\nbackbone = "minilm"',
         "profiles.full.lr: unknown key; known: backbone, seeds, args, launcher, about"),
        ("[train_rows]", "colour = 1\n[train_rows]", "colour: unknown key"),
        ('[profiles.full]\nbackbone = "minilm"\n', "[profiles.full]\n", "profiles.full.backbone: missing"),
        ("seeds = [0, 1, 2, 3, 4]", 'seeds = "0-4"',
         "profiles.gpu.seeds: expected an array of integers, got a string"),
        ("esnli_rows = 200", "esnli_rows = true",
         "profiles.cpu-small.esnli_rows: expected an integer >= 1, got a boolean"),
        ('args = "peer"', 'args = "pear"',
         "profiles.cpu-full.args: unknown recipe 'pear'; known: cpu, peer, synthetic"),
        ("learning_rate = 5e-5", "learning_rate = [5e-5]",
         "recipes.cpu.learning_rate: expected a string, number or boolean, got an array"),
        ('csr-bi = ["synthetic"]', 'csr-by = ["synthetic"]', "groups.conditional.csr-by: unknown comparison 'csr-by'"),
        ('seaver = ["synthetic"]', 'seaver = ["stsb"]',
         "groups.conditional.seaver[0]: 'seaver' has no data set 'stsb'; its own: synthetic"),
        ('{ groups = ["siamese-mrpc"] }', '{ groups = ["siamese-mrcp"] }',
         "profiles.cpu-full.stages[2].groups[0]: unknown group 'siamese-mrcp'"),
        ('{ groups = ["conditional"], first_seeds = 3 }', '{ groups = ["conditional"], first_seeds = 0 }',
         "profiles.gpu.stages[1].first_seeds: expected an integer >= 1, got 0"),
        ('launcher = "accelerate"', 'launcher = "torchrun"',
         "profiles.full.launcher: expected one of python, accelerate, got 'torchrun'"),
        ("sick-e = { num_train_epochs = 2 }", "sick = { num_train_epochs = 2 }",
         "profiles.cpu-full.dataset_args.sick: unknown data set 'sick'"),
        ("[profiles.gpu]", "[profiles.gpu2]", "profiles: no profile ['gpu'], where 'cross-encoder' runs"),
        ("[train_rows]", "[train_rows", "not valid TOML"),
    ],
)  # fmt: skip
def test_a_bad_grid_file_is_refused_naming_the_file_and_the_key(tmp_path, old, new, message):
    path = _grid_copy(tmp_path, old, new)
    with pytest.raises(ValueError) as raised:
        load_grid(path, quality.COMPARISONS)
    assert str(raised.value).startswith(f"{path}: ") and message in str(raised.value)
    assert "\n" not in str(raised.value).split(" (at line")[0]


# --------------------------------------------------------------------------------------------- --list and flags


def test_list_prints_every_planned_run_with_counts_and_trains_nothing(tmp_path, capsys):
    done = ["cross-encoder__cross-encoder__stsb__seed0", "comateformer__plain-backbone__mrpc__seed1"]
    for run_id in done:
        (tmp_path / "runs").mkdir(exist_ok=True)
        (tmp_path / "runs" / f"{run_id}.json").write_text("{}")
    argv = ["--profile", "cpu-full", "--only", "cross-encoder", "comateformer", "--seeds", "0", "1"]
    quality.main([*argv, "--list", "--output_dir", str(tmp_path)])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"# cpu-full: {quality.PROFILES['cpu-full'].about}"
    lines = [line for line in out if not line.startswith("#")]
    arms = {c.name: len(quality.profile_arms(c, "cpu-full")) for c in quality.COMPARISONS}
    expected = 2 * 3 * (arms["cross-encoder"] + arms["comateformer"])  # seeds x data sets x arms
    assert arms["comateformer"] == 8 and len(lines) == expected + 1
    rows, epochs = {"stsb": 5749, "sick-e": 4439, "mrpc": 3668}, {"stsb": 1, "sick-e": 2, "mrpc": 2}
    examples = 0
    for line in lines[:-1]:
        run_id, epoch_field, rows_field, status = line.split(maxsplit=3)
        dataset = run_id.split("__")[2]
        assert epoch_field == f"epochs={epochs[dataset]}" and rows_field == f"rows={rows[dataset]}"
        assert status == ("done" if run_id in done else "to run")
        examples += 0 if run_id in done else rows[dataset] * epochs[dataset]
    assert (
        lines[-1]
        == f"{expected} runs planned: 2 done, {expected - 2} to run ({examples:,} training examples, rows x epochs)"
    )
    assert sorted(p.stem for p in (tmp_path / "runs").iterdir()) == sorted(done)


def test_arms_flag_keeps_only_the_named_arms_in_plan_order(tmp_path, capsys):
    labels = ["comateformer (mix)", "plain backbone"]
    argv = ["--profile", "cpu-full", "--only", "comateformer", "--seeds", "0", "--output_dir", str(tmp_path)]
    quality.main([*argv, "--arms", *labels, "--list"])
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines() if not line.startswith("#")][:-1]
    planned = [r.id for r in quality.plan_runs("cpu-full", (0,), _comparisons("comateformer"))]
    expected = [i for i in planned if i.split("__")[1] in {"comateformer--mix-", "plain-backbone"}]
    assert listed == expected and len(expected) == 6


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max_runs", "0"], "--max_runs must be an integer >= 1, got 0."),
        (["--workers", "0"], "--workers must be an integer >= 1, got 0."),
        (["--time_budget_s", "x"], "argument --time_budget_s/--time-budget-s: invalid int value: 'x'"),
        (["--profile", "cpu"], "argument --profile: invalid choice: 'cpu'"),
        (["--deadline", "5"], "unrecognized arguments: --deadline 5"),
        (["--only", "siamese-bimpm", "--profile", "gpu"], "--only: unknown comparison(s) ['siamese-bimpm']"),
        (["--only", "comateformer", "--datasets", "rte", "--profile", "cpu-full"], "--datasets: ['rte'] not among"),
        (["--only", "comateformer", "--arms", "esim", "--profile", "cpu-full"], "--arms: unknown arm label(s)"),
    ],
)
def test_bad_quality_flags_print_one_line_and_write_nothing(tmp_path, argv, message, capsys):
    for extra in (["--list"], []):
        assert run_command("quality.py", quality.main, [*argv, *extra, "--output_dir", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"quality.py: error: {message}") and err.count("\n") == 1
    assert not any(tmp_path.iterdir())


def test_arms_whose_overrides_the_config_does_not_take_are_listed_and_never_trained(tmp_path, monkeypatch, capsys):
    arm = quality.Arm("bogus", "cross-encoder", {"not_a_field": 1})
    monkeypatch.setattr(quality, "COMPARISONS", [quality.Comparison("c", (arm,), ("stsb",))])
    argv = ["--profile", "cpu-medium", "--seeds", "0", "--output_dir", str(tmp_path)]
    quality.main([*argv, "--list"])
    assert "# 'c / bogus': ['not_a_field'] are not config parameters" in capsys.readouterr().out
    with pytest.raises(ValueError, match="not_a_field"):
        quality.main(argv)
    assert not any(tmp_path.iterdir())


# --------------------------------------------------------------------------------------------- the runner

ESIM_SICK_E = ["--profile", "cpu-full", "--only", "siamese-esim", "--datasets", "sick-e"]


def test_max_runs_stops_after_that_many_trained_runs_and_resumes(tmp_path, monkeypatch):
    calls = _fake_training(monkeypatch)
    only = ["cross-encoder", "siamese-esim"]
    argv = ["--profile", "cpu-full", "--only", *only, "--datasets", "sick-e", "--seeds", "0"]
    argv += ["--output_dir", str(tmp_path)]
    planned = [r.id for r in quality.plan_runs("cpu-full", (0,), _comparisons(*only), ("sick-e",))]
    assert len(planned) == 6
    quality.main([*argv, "--max_runs", "4"])
    assert sorted(p.stem for p in (tmp_path / "runs").iterdir()) == sorted(planned[:4])
    quality.main([*argv, "--max_runs", "4", "--workers", "2"])  # the two left
    assert sorted(p.stem for p in (tmp_path / "runs").iterdir()) == sorted(planned) and len(calls) == 6
    records = [json.loads((tmp_path / "runs" / f"{i}.json").read_text()) for i in planned]
    assert [r["baseline"] for r in records] == [True, True, False, False, False, False]
    assert [r["train_args"]["num_train_epochs"] for r in records] == [2, 3, 3, 3, 3, 3]
    quality.main([*argv, "--force", "--max_runs", "1"])  # --force retrains a run whose file exists
    assert len(calls) == 7 and _flag(calls[-1][0], "--model") == "cross-encoder"


def test_a_failing_run_writes_no_file_the_grid_goes_on_and_the_command_fails_naming_it(tmp_path, monkeypatch, capsys):
    broken = {"esim + fa"}
    runs = quality.plan_runs("cpu-full", (0,), _comparisons("siamese-esim"), ("sick-e",))
    labels = {json.dumps(r.arm.overrides): r.arm.label for r in runs}

    def train(argv: list) -> dict:
        if labels[_flag(argv, "--config_overrides")] in broken:
            raise RuntimeError("expected dtype c10::BFloat16")
        return {"validation_accuracy": 80.0}

    calls = _fake_training(monkeypatch, train)
    failing = [r.id for r in runs if r.arm.label in broken]
    assert len(failing) == 1 and len(runs) > 2 and runs[-1].arm.label not in broken
    argv = [*ESIM_SICK_E, "--seeds", "0", "--output_dir", str(tmp_path)]
    with pytest.raises(SystemExit, match="1 run\\(s\\) failed") as stop:
        quality.main(argv)
    assert failing[0] in str(stop.value)
    assert sorted(p.stem for p in (tmp_path / "runs").iterdir()) == sorted(r.id for r in runs if r.id != failing[0])
    printed = capsys.readouterr()
    assert f"FAILED {failing[0]}" in printed.out and "RuntimeError: expected dtype" in printed.err
    broken.clear()
    calls.clear()
    quality.main(argv)  # resumes: only the failed run trains
    assert [labels[_flag(a, "--config_overrides")] for a, _ in calls] == ["esim + fa"]
    assert len(list((tmp_path / "runs").iterdir())) == len(runs)


def test_time_budget_starts_no_run_that_would_end_past_it(tmp_path, monkeypatch, capsys):
    clock = [0.0]
    monkeypatch.setattr(quality.time, "time", lambda: clock[0])

    def train(argv: list) -> dict:
        clock[0] += 40.0  # every run takes 40 s
        return {"validation_accuracy": 80.0}

    _fake_training(monkeypatch, train)
    quality.main([*ESIM_SICK_E, "--seeds", "0", "1", "--output_dir", str(tmp_path), "--time_budget_s", "100"])
    # runs end at 40 and 80 s; a third would end at 120 > 100
    assert len(list((tmp_path / "runs").iterdir())) == 2
    assert "stopped after 2 runs: the next could end past --time_budget_s" in capsys.readouterr().out


def test_workers_train_that_many_runs_at_once_each_once_with_their_share_of_the_cores(tmp_path, monkeypatch):
    together = threading.Barrier(2, timeout=30)  # a run returns only once another is training beside it
    live, most = [0], [0]
    lock = threading.Lock()

    def train(argv: list) -> dict:
        with lock:
            live[0] += 1
            most[0] = max(most[0], live[0])
        together.wait()
        with lock:
            live[0] -= 1
        return {"validation_accuracy": 80.0}

    calls = _fake_training(monkeypatch, train)
    monkeypatch.setattr(quality.os, "cpu_count", lambda: 16)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    planned = [r.id for r in quality.plan_runs("cpu-full", (0, 1), _comparisons("siamese-esim"), ("sick-e",))]
    quality.main([*ESIM_SICK_E, "--seeds", "0", "1", "--workers", "2", "--output_dir", str(tmp_path)])
    assert sorted(p.stem for p in (tmp_path / "runs").iterdir()) == sorted(planned) and len(calls) == len(planned)
    assert most[0] == 2 and {threads for _, threads in calls} == {8}  # 16 cores / 2 workers
    record = json.loads((tmp_path / "runs" / f"{planned[0]}.json").read_text())
    assert record["hardware"]["torch_threads"] == 8
    # a set OMP_NUM_THREADS is every subprocess's (inherited), as is torch's default for one run at a time
    assert quality.child_threads(1) is None
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert quality.child_threads(2) is None


def test_run_one_trains_in_a_pairzoo_train_subprocess_of_its_launcher(tmp_path, monkeypatch):
    started = []

    def fake_run(command: list, check: bool, cwd: Path, env: dict) -> None:
        started.append((command, env.get("OMP_NUM_THREADS")))
        (tmp_path / "metrics.json").write_text(json.dumps({"metrics": {"validation_accuracy": None}}))

    monkeypatch.setattr(quality.subprocess, "run", fake_run)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert quality.run_one(["--seed", "0"], "python", tmp_path, 4) == {"validation_accuracy": None}
    quality.run_one(["--seed", "0"], "accelerate", tmp_path)
    tail = ["-m", "pairzoo.train", "--seed", "0", "--disable_tqdm", "True"]
    assert started == [([sys.executable, *tail], "4"), (["accelerate", "launch", *tail], None)]


def test_adapted_arms_train_on_one_task_adapted_backbone_written_before_any_run(tmp_path, monkeypatch):
    adaptations = []

    def fake_adapt(argv: list) -> int:
        adaptations.append(argv)
        folder = Path(_flag(argv, "--output_dir"))
        folder.mkdir(parents=True)
        (folder / "adaptation.json").write_text(json.dumps({"dataset": _flag(argv, "--dataset")}))
        return 0

    import pairzoo.adapt_mlm

    monkeypatch.setattr(pairzoo.adapt_mlm, "main", fake_adapt)
    calls = _fake_training(monkeypatch, lambda argv: {"validation_accuracy": float(len(adaptations))})
    monkeypatch.setattr(quality, "expressiveness_metrics", lambda *args: {})
    arms = ["full fine-tuning", "full fine-tuning (adapted backbone)"]
    argv = ["--profile", "cpu-full", "--only", "neighbor-attention", "--arms", *arms, "--output_dir", str(tmp_path)]
    quality.main([*argv, "--seeds", "0", "1"])
    folder = tmp_path / "adapted" / "minilm__sick-e"
    assert len(adaptations) == 1  # one adaptation for both seeds, before the first run
    flags = adaptations[0]
    assert flags[:6] == ["--dataset", "sick-e", "--backbone", "minilm", "--output_dir", str(folder)]
    assert flags[6:] == [f"--{key}={value}" for key, value in quality.ADAPTATION.items()]
    assert [_flag(a, "--backbone") for a, _ in calls] == ["minilm", str(folder)] * 2
    run_file = tmp_path / "runs" / "neighbor-attention__full-fine-tuning--adapted-backbone-__sick-e__seed1.json"
    record = json.loads(run_file.read_text())
    assert record["backbone"] == str(folder) and record["adaptation"] == {"dataset": "sick-e"}
    assert record["metrics"] == {"validation_accuracy": 1.0}
    plain = json.loads((tmp_path / "runs" / "neighbor-attention__full-fine-tuning__sick-e__seed0.json").read_text())
    assert plain["backbone"] == "minilm" and "adaptation" not in plain
    # a failed adaptation stops the benchmark before any run trains or anything is written
    monkeypatch.setattr(pairzoo.adapt_mlm, "main", lambda argv: 2)
    with pytest.raises(SystemExit, match="task-adaptive MLM step of 'minilm' on 'sick-e' failed"):
        quality.main([*argv, "--seeds", "2", "--output_dir", str(tmp_path / "other")])
    assert not (tmp_path / "other" / "runs").exists() and len(calls) == 4


# --------------------------------------------------------------------------------------------- data checks

SICK_HEADER = (
    "pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\tentailment_AB\tentailment_BA\t"
    "sentence_A_original\tsentence_B_original\tsentence_A_dataset\tsentence_B_dataset\tSemEval_set"
)
ESNLI_DEV = ["labels.dev", "s1.dev", "s2.dev", *(f"preproc1_expl_{k}.dev" for k in (1, 2, 3))]


def _sick_folder(folder: Path) -> Path:
    """A data folder holding a two-row SICK.txt (one TRAIN, one TRIAL row) and nothing else."""
    (folder / "SICK").mkdir(parents=True)
    rows = [
        f"{n}\tA man plays.\tA man is playing.\tENTAILMENT\t4.5\tx\tx\ta\tb\tc\td\t{semeval_set}"
        for n, semeval_set in ((1, "TRAIN"), (2, "TRIAL"))
    ]
    (folder / "SICK" / "SICK.txt").write_text("\n".join([SICK_HEADER, *rows]) + "\n")
    return folder


def _no_training(monkeypatch) -> None:
    """Every step that trains, adapts, scores or starts a subprocess fails the test."""

    def trains(*args, **kwargs):
        raise AssertionError("nothing may train before the data check")

    import pairzoo.adapt_mlm

    for name in ("run_one", "expressiveness_metrics", "adapted_backbone"):
        monkeypatch.setattr(quality, name, trains)
    monkeypatch.setattr(quality, "environment", lambda threads=None: {"hardware": {}, "git_commit": "x"})
    monkeypatch.setattr(pairzoo.adapt_mlm, "main", trains)
    monkeypatch.setattr(quality.subprocess, "run", trains)


def test_missing_esnli_files_stop_the_neighbor_attention_plan_before_anything_starts(tmp_path, monkeypatch, capsys):
    # the lent-GPU failure: a data folder with SICK but no e-SNLI, which every SICK-E neighbor-attention run scores
    data = _sick_folder(tmp_path / "data")
    monkeypatch.setenv("PAIRZOO_DATA_DIR", str(data))
    _no_training(monkeypatch)
    out = tmp_path / "out"
    argv = ["--profile", "gpu", "--only", "neighbor-attention", "--datasets", "sick-e", "--seeds", "0"]
    argv += ["--output_dir", str(out)]
    runs = len(quality.plan_runs("gpu", (0,), _comparisons("neighbor-attention")))
    first = "neighbor-attention__full-fine-tuning__sick-e__seed0"
    paths = ", ".join(repr(str(data / "e-SNLI" / name)) for name in ESNLI_DEV)
    expected = (
        f"split 'validation' of 'snli' needs {paths}, which are missing (read for [MASK] expressiveness by {runs} "
        f"runs, first {first})"
    )
    for extra in ([], ["--workers", "2"]):  # refused before any adaptation step or run
        assert run_command("quality.py", quality.main, [*argv, *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"quality.py: error: data the runs still to run read is missing: {expected}. ")
        assert err.count("\n") == 1 and "'sick-e'" not in err.split(first, 1)[1]  # SICK itself is there
    assert not out.exists()
    # --list trains nothing and names the missing files as a `#` line
    quality.main([*argv, "--list"])
    assert f"# missing data: {expected}" in capsys.readouterr().out.splitlines()
    # with the files there, the check passes: --list has no such line and a run trains and scores as before
    (data / "e-SNLI").mkdir()
    for name in ESNLI_DEV:
        (data / "e-SNLI" / name).write_text("")
    quality.main([*argv, "--list"])
    assert "missing data" not in capsys.readouterr().out
    scored = []
    monkeypatch.setattr(quality, "run_one", lambda argv, launcher, output_dir, threads: {"validation_accuracy": 50.0})
    monkeypatch.setattr(quality, "expressiveness_metrics", lambda *args: scored.append(args[1]) or {})
    quality.main([*argv, "--arms", "full fine-tuning"])
    assert scored == ["sick-e"] and [p.stem for p in (out / "runs").iterdir()] == [first]


def test_a_missing_validation_file_or_data_folder_stops_the_runs_that_read_it_only(tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    (data / "RTE").mkdir(parents=True)
    (data / "RTE" / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n")
    monkeypatch.setenv("PAIRZOO_DATA_DIR", str(data))
    _no_training(monkeypatch)
    out = tmp_path / "out"
    argv = ["--profile", "cpu-medium", "--only", "neighbor-attention", "--datasets", "rte", "--seeds", "0"]
    argv += ["--arms", "full fine-tuning", "bitfit", "--output_dir", str(out)]
    dev = repr(str(data / "RTE" / "dev.tsv"))
    with pytest.raises(FileNotFoundError) as stop:
        quality.main(argv)
    assert str(stop.value) == (
        f"data the runs still to run read is missing: split 'validation' of 'rte' needs {dev}, which is missing "
        "(read for evaluation and [MASK] expressiveness by 2 runs, first "
        "neighbor-attention__full-fine-tuning__rte__seed0). Add it to the data folder, or leave those runs out "
        "(--only, --datasets, --arms); nothing was started."
    )
    assert not out.exists()
    # no data folder at all: one line naming the splits and the folder
    monkeypatch.setenv("PAIRZOO_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(
        FileNotFoundError, match=r"no data folder for 'rte' train, 'rte' validation: data folder '.*nowhere'"
    ):
        quality.main(argv)
    quality.main([*argv, "--list"])
    assert "# missing data: no data folder for 'rte' train" in capsys.readouterr().out
    # runs already done read nothing: the same plan with both run files there passes the check
    (out / "runs").mkdir(parents=True)
    for run_id in ("neighbor-attention__full-fine-tuning__rte__seed0", "neighbor-attention__bitfit__rte__seed0"):
        (out / "runs" / f"{run_id}.json").write_text("{}")
    quality.main(argv)
    assert "0 runs trained, done in" in capsys.readouterr().out
    # synthetic needs no files
    assert quality.missing_data(quality.plan_runs("cpu-small", (0,), datasets=("synthetic",))) == []


def test_expressiveness_reads_the_esnli_split_by_name_so_a_missing_file_is_named(tmp_path, monkeypatch):
    import transformers

    import pairzoo.training.expressiveness

    class Model:
        def to(self, device):
            return self

    monkeypatch.setenv("PAIRZOO_DATA_DIR", str(_sick_folder(tmp_path / "data")))
    monkeypatch.setattr(transformers.AutoModelForSequenceClassification, "from_pretrained", lambda path: Model())
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda path: None)
    scored = []

    def fake_evaluate(model, tokenizer, rows, keywords, k, max_length):
        scored.append((len(rows), keywords))
        return {"recall@20": 1.0, "precision@20": 1.0, "examples_with_keywords": len(rows)}

    monkeypatch.setattr(pairzoo.training.expressiveness, "evaluate_expressiveness", fake_evaluate)
    labels = str(tmp_path / "data" / "e-SNLI" / "labels.dev")
    with pytest.raises(FileNotFoundError, match=f"split 'validation' of 'snli' needs '{labels}', which is missing"):
        quality.expressiveness_metrics(tmp_path, "sick-e", {}, 10)
    assert scored == [(1, "pair")]  # SICK-E's one TRIAL row was scored first


def _fake_run(comparison: str, arm: str, dataset: str, seed: int, value: float, epochs: int = 1) -> dict:
    return {
        "comparison": comparison,
        "arm": arm,
        "baseline": arm == "base",
        "model": "m",
        "config_overrides": {},
        "dataset": dataset,
        "seed": seed,
        "profile": "cpu-full",
        "backbone": "minilm",
        "train_args": {"learning_rate": 2e-5, "num_train_epochs": epochs},
        "metrics": {("validation_spearman" if dataset == "stsb" else "validation_accuracy"): value},
        "wall_seconds": 1.0,
        "hardware": {"cuda": None, "cpu_count": 2, "torch_threads": 2},
        "git_commit": "0123456789abcdef",
    }


def _write_fake_results(folder: Path) -> dict:
    values = {
        ("base", "stsb"): [81.0, 82.0, 83.0],
        ("m", "stsb"): [84.0, 85.0, 86.0],
        ("base", "rte"): [60.0, 61.0, 62.0],
        ("m", "rte"): [60.5, 61.5, 62.5],
    }
    (folder / "runs").mkdir(parents=True)
    for (arm, dataset), per_seed in values.items():
        for seed, value in enumerate(per_seed):
            run = _fake_run("c", arm, dataset, seed, value, epochs=2 if dataset == "rte" else 1)
            (folder / "runs" / f"{arm}-{dataset}-{seed}.json").write_text(json.dumps(run))
    return values


def test_report_puts_the_peer_beside_each_arm_of_the_peer_profiles(tmp_path):
    values = _write_fake_results(tmp_path / "res")
    peer = {"metric": "spearman", "seeds": [0, 1, 2], "per_seed": [82.0, 82.5, 83.0], "epochs": 1, "lr": 2e-5}
    peer |= {"mean": statistics.mean(peer["per_seed"]), "std": statistics.stdev(peer["per_seed"])}
    peers_path = tmp_path / "peers.json"
    peers_path.write_text(
        json.dumps({"about": "x", "cross_encoder": {"stsb": peer, "mrpc": {**peer, "metric": "accuracy"}}})
    )
    markdown = report.build_report(tmp_path / "res", peers_path=peers_path)
    m = statistics.mean(values["m", "stsb"])
    delta_peer = m - peer["mean"]  # 2.5, beyond 1.0 + 0.5
    assert (
        "#### c" in markdown and "| data set | arm | training | metric | mean ± std | delta vs baseline |" in markdown
    )
    assert (
        f"| stsb | m | num_train_epochs=1 | spearman | 85.00 ± 1.00 | +3.00 * | 82.50 ± 0.50 | {delta_peer:+.2f} * |"
        in markdown
    )
    assert (
        "| stsb | base | num_train_epochs=1 | spearman | 82.00 ± 1.00 | baseline | 82.50 ± 0.50 | -0.50 |" in markdown
    )
    # no peer for RTE: empty peer cells; epochs differ by data set, so each row lists its own
    assert "| rte | m | num_train_epochs=2 | accuracy | 61.50 ± 1.00 | +0.50 |  |  |" in markdown
    assert "learning_rate=2e-05" in markdown.split("#### c")[0] and str(peers_path) in markdown
    assert "epochs 1" in markdown and "lr 2e-05" in markdown  # the peer's recipe, from the file
    assert (tmp_path / "res" / "RESULTS.md").read_text() == markdown + "\n"


def test_report_says_when_the_peer_file_is_missing_and_rejects_a_bad_one(tmp_path):
    _write_fake_results(tmp_path / "res")
    markdown = report.build_report(tmp_path / "res", peers_path=tmp_path / "absent.json")
    assert "Peer columns left out" in markdown and "peer CrossEncoder" not in markdown
    assert "| stsb | m | num_train_epochs=1 | spearman | 85.00 ± 1.00 | +3.00 * |" in markdown
    (tmp_path / "res" / "RESULTS.md").unlink()
    bad = tmp_path / "bad.json"
    for text in ("{not json", json.dumps({"cross_encoder": {"stsb": {"metric": "spearman"}}})):
        bad.write_text(text)
        with pytest.raises(ValueError, match="bad.json"):
            report.build_report(tmp_path / "res", peers_path=bad)
        assert not (tmp_path / "res" / "RESULTS.md").exists()


def test_readme_section_of_a_new_profile_is_added_under_its_heading_then_replaced(tmp_path):
    text = "# x\n\n## Results, a\n\n<!-- results:a:start -->\nA\n<!-- results:a:end -->\n\n## Inference\n"
    added = report.readme_with_section(text, "NEW", "cpu-full", "Results, cpu-full")
    assert added == (
        "# x\n\n## Results, a\n\n<!-- results:a:start -->\nA\n<!-- results:a:end -->\n\n## Results, cpu-full\n\n"
        "<!-- results:cpu-full:start -->\nNEW\n<!-- results:cpu-full:end -->\n\n## Inference\n"
    )
    replaced = report.readme_with_section(added, "NEWER", "cpu-full", "Results, cpu-full")
    assert replaced == added.replace("NEW\n", "NEWER\n") and replaced.count("## Results, cpu-full") == 1
    with pytest.raises(ValueError, match="results:cpu-full:start"):
        report.readme_with_section(text, "NEW", "cpu-full")
    readme = tmp_path / "README.md"
    readme.write_text(text)
    _write_fake_results(tmp_path / "cpu-full")
    with pytest.raises(ValueError, match="results:cpu-full:start"):
        report.build_report(tmp_path / "cpu-full", readme, peers_path=tmp_path / "absent.json")
    assert readme.read_text() == text and not (tmp_path / "cpu-full" / "RESULTS.md").exists()


def test_a_runs_folder_of_another_backbone_is_refused_before_it_counts_as_done(tmp_path, capsys):
    """Run files are named without their backbone: resuming a MiniLM folder with `--backbone mpnet-base` would
    count MiniLM's runs as done. It is refused, naming the flag, the folder's backbone and a file; a folder of the
    same backbone (a task-adapted run names its base backbone) resumes."""
    runs = tmp_path / "runs"
    runs.mkdir()
    run = {"backbone": "minilm", "metrics": {}}
    (runs / "cross-encoder__cross-encoder__stsb__seed0.json").write_text(json.dumps(run))
    adapted = {"backbone": str(tmp_path / "adapted" / "minilm__sick-e"), "adaptation": {"backbone": "minilm"}}
    (runs / "neighbor-attention__bitfit--adapted-backbone-__sick-e__seed0.json").write_text(json.dumps(adapted))
    before = sorted(p.name for p in runs.iterdir())
    argv = ["--profile", "cpu-full", "--only", "cross-encoder", "--datasets", "stsb", "--seeds", "0"]
    for extra in (["--list"], []):
        code = run_command(
            "quality.py", quality.main, [*argv, *extra, "--backbone", "mpnet-base", "--output_dir", str(tmp_path)]
        )
        assert code == 2
        err = capsys.readouterr().err
        assert (
            err.startswith(
                f"quality.py: error: --backbone mpnet-base: {str(runs)!r} holds runs on 'minilm' "
                "(cross-encoder__cross-encoder__stsb__seed0.json)"
            )
            and err.count("\n") == 1
        )
    assert sorted(p.name for p in runs.iterdir()) == before
    quality.main([*argv, "--list", "--output_dir", str(tmp_path)])  # the folder's own backbone: listed as done
    assert "cross-encoder__cross-encoder__stsb__seed0  epochs=1  rows=5749  done" in capsys.readouterr().out
