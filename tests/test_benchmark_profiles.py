"""Benchmark profiles: the peer-budget `cpu-full` and the `gpu` grid resolve the right training arguments
and order, the earlier profiles keep exactly their committed run ids, `--list` / `--max_runs` plan and budget without
training, `--workers` claims each run once, and the report puts the sentence-transformers peer beside pairzoo's arms.
Only the integration test of `--workers` trains (two tiny-bert runs, in two real worker processes)."""

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import quality  # noqa: E402
import report  # noqa: E402

ADAPTED_ARMS = (
    "full fine-tuning",
    "bitfit (batch-norm head)",
    "neighbor attention (batch-norm head)",
    "neighbor attention + reg (batch-norm head)",
)
PEER_RECIPE = {"num_train_epochs": None, "learning_rate": 2e-5, "weight_decay": 0.01, "warmup_steps": 0.1}


def _run(runs: list, comparison: str, arm: str, dataset: str, seed: int = 0) -> "quality.PlannedRun":
    return next(
        r for r in runs if (r.comparison.name, r.arm.label, r.dataset, r.seed) == (comparison, arm, dataset, seed)
    )


def test_cpu_full_trains_transformer_arms_with_the_peer_recipe_per_data_set():
    runs = quality.plan_runs("cpu-full", (0,))
    epochs = {"stsb": 1, "sick-e": 2, "mrpc": 2}  # the peer file's epochs per data set
    for arm in ("cross-encoder", "plain backbone", "comateformer (paper)", "comateformer (mix, l1)"):
        comparison = "cross-encoder" if arm == "cross-encoder" else "comateformer"
        for dataset, n in epochs.items():
            args = _run(runs, comparison, arm, dataset).train_args
            assert args["num_train_epochs"] == n and args["learning_rate"] == 2e-5 and args["weight_decay"] == 0.01
            assert args["per_device_train_batch_size"] == 16 and args["max_length"] == 128
            assert args["warmup_steps"] == 0.1
            assert "max_train_samples" not in args and "max_eval_samples" not in args and "bf16" not in args
    # a method's own learning rate still wins over the profile's (BitFit); neighbor attention's comparison trains the
    # paper's 5 epochs instead of the data set's 2
    bitfit = _run(runs, "neighbor-attention", "bitfit", "sick-e").train_args
    assert bitfit["learning_rate"] == 1e-3 and bitfit["num_train_epochs"] == 5


def test_cpu_full_siamese_hosts_keep_their_own_schedule_on_the_full_split():
    runs = quality.plan_runs("cpu-full", (0,))
    for arm in ("esim", "re2 + sfa", "drcn + sfa (residual)", "drcn + sfa (branch-sum squeeze)"):
        comparison = f"siamese-{arm.split()[0]}"
        args = _run(runs, comparison, arm, "sick-e").train_args
        assert args["num_train_epochs"] == 3 and args["learning_rate"] == 1e-3
        assert args["per_device_train_batch_size"] == 16 and "max_train_samples" not in args
        assert quality.planned_rows("sick-e", args) == quality.TRAIN_ROWS["sick-e"]


def test_training_arguments_take_profile_then_data_set_then_comparison_then_arm_then_cuda():
    profile = {
        "args": {"learning_rate": 1.0, "num_train_epochs": 1, "weight_decay": 0.0, "max_length": 8, "warmup_steps": 0},
        "dataset_args": {"d": {"num_train_epochs": 2, "weight_decay": 0.5, "learning_rate": 2.0, "max_length": 16}},
        "comparison_args": {"c": {"max_length": 32, "learning_rate": 4.0, "weight_decay": 0.75}},
        "cuda_args": {"bf16": True},
    }
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
    # another comparison takes the data set's arguments, not c's
    other = quality.Comparison("o", (arm,), ("d",))
    assert quality.profile_train_args(other, arm, profile, "d") == {**args, "learning_rate": 2.0, "max_length": 16}


@pytest.mark.parametrize("name", ["cpu-small", "cpu-medium"])
def test_earlier_profiles_plan_exactly_their_committed_run_ids(name):
    committed = {p.stem for p in (REPO / "benchmarks" / "results" / name / "runs").glob("*.json")}
    assert committed
    planned = [r.id for r in quality.plan_runs(name, quality.PROFILES[name]["seeds"])]
    assert len(planned) == len(set(planned))
    ran = {i.split("__")[0] for i in committed}  # cpu-medium has not run every comparison yet (SEAVER)
    assert {i for i in planned if i.split("__")[0] in ran} == committed
    new_arms = [a.label for c in quality.COMPARISONS for a in c.arms if a.profiles == quality.PEER_PROFILES]
    assert new_arms and not any(a for a in new_arms if any(f"__{a}__" in i for i in planned))
    assert not any(i.startswith("cross-encoder__") for i in planned)


def test_cpu_full_runs_stage_by_stage_and_seed_major_within_a_stage():
    runs = quality.plan_runs("cpu-full", (0, 1, 2))
    assert len(runs) == len({r.id for r in runs})
    required = {(c, d) for c, ds in quality.PEER_REQUIRED_GRID for d in ds}
    in_required = [(r.comparison.name, r.dataset) in required for r in runs]
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


REQUIRED_PAIRS = {(c, d) for c, ds in quality.PEER_REQUIRED_GRID for d in ds}
CONDITIONAL_PAIRS = {
    ("seaver", "synthetic"),
    ("seaver-absa", "absa-restaurants"),
    ("seaver-absa", "absa-laptops"),
    ("csr-tri", "synthetic"),
    ("csr-bi", "synthetic"),
}


def test_gpu_profile_runs_the_required_grid_first_at_three_epochs_and_five_seeds_bf16_only_on_cuda():
    profile = quality.PROFILES["gpu"]
    assert tuple(profile["seeds"]) == (0, 1, 2, 3, 4) and profile["launcher"] == "in-process"
    runs = quality.plan_runs("gpu", profile["seeds"])
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
    on_cuda = quality.plan_runs("gpu", profile["seeds"], cuda=True)
    assert [r.id for r in on_cuda] == [r.id for r in runs]
    assert all(r.train_args == {**plain.train_args, "bf16": True} for r, plain in zip(on_cuda, runs))


def test_gpu_profile_runs_conditional_then_neighbor_attention_after_the_required_grid_on_three_seeds():
    runs = quality.plan_runs("gpu", quality.PROFILES["gpu"]["seeds"])
    assert len(runs) == len({r.id for r in runs})
    later = [r for r in runs if (r.comparison.name, r.dataset) not in REQUIRED_PAIRS]
    pairs = [(r.comparison.name, r.dataset) for r in later]
    assert set(pairs) == CONDITIONAL_PAIRS | {("neighbor-attention", "sick-e")}
    first_na = pairs.index(("neighbor-attention", "sick-e"))
    assert set(pairs[:first_na]) == CONDITIONAL_PAIRS and set(pairs[first_na:]) == {("neighbor-attention", "sick-e")}
    assert {r.seed for r in later} == {0, 1, 2}  # stage_seeds: the first 3 of the profile's 5
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
        assert all(args[k] == full[run.comparison.name, run.arm.label][k] for k in quality.SYNTHETIC_TRAINING)
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


def test_adapted_arms_train_on_one_task_adapted_backbone_written_once(tmp_path, monkeypatch):
    monkeypatch.setattr(quality, "missing_data", lambda runs: [])  # training is faked: no data read
    adaptations, backbones = [], []

    def fake_adapt(argv: list) -> int:
        adaptations.append(argv)
        folder = Path(argv[argv.index("--output_dir") + 1])
        folder.mkdir(parents=True)
        (folder / "adaptation.json").write_text(json.dumps({"dataset": argv[argv.index("--dataset") + 1]}))
        return 0

    def fake_run_one(argv: list, launcher: str, output_dir: Path) -> dict:
        backbones.append(argv[argv.index("--backbone") + 1])
        return {"validation_accuracy": 60.0}

    import pairzoo.adapt_mlm

    monkeypatch.setattr(pairzoo.adapt_mlm, "main", fake_adapt)
    monkeypatch.setattr(quality, "run_one", fake_run_one)
    monkeypatch.setattr(quality, "expressiveness_metrics", lambda *args: {})
    monkeypatch.setattr(quality, "environment", lambda: {"hardware": {}, "versions": {}, "git_commit": "x"})
    arms = ["full fine-tuning", "full fine-tuning (adapted backbone)"]
    argv = ["--profile", "cpu-full", "--only", "neighbor-attention", "--arms", *arms, "--output_dir", str(tmp_path)]
    quality.main([*argv, "--seeds", "0", "1"])
    folder = tmp_path / "adapted" / "minilm__sick-e"
    assert len(adaptations) == 1  # one adaptation for both seeds
    flags = adaptations[0]
    assert flags[:6] == ["--dataset", "sick-e", "--backbone", "minilm", "--output_dir", str(folder)]
    assert flags[6:] == [f"--{key}={value}" for key, value in quality.ADAPTATION.items()]
    assert backbones == ["minilm", str(folder)] * 2
    record = json.loads(
        (tmp_path / "runs" / "neighbor-attention__full-fine-tuning--adapted-backbone-__sick-e__seed1.json").read_text()
    )
    assert record["backbone"] == str(folder) and record["adaptation"] == {"dataset": "sick-e"}
    plain = json.loads((tmp_path / "runs" / "neighbor-attention__full-fine-tuning__sick-e__seed0.json").read_text())
    assert plain["backbone"] == "minilm" and "adaptation" not in plain
    # a failed adaptation stops the benchmark before the adapted arm trains or writes anything
    monkeypatch.setattr(pairzoo.adapt_mlm, "main", lambda argv: 2)
    with pytest.raises(SystemExit, match="task-adaptive MLM step of 'minilm' on 'sick-e' failed"):
        quality.main([*argv, "--seeds", "2", "--output_dir", str(tmp_path / "other")])
    assert sorted(p.name for p in (tmp_path / "other" / "runs").iterdir()) == [
        "neighbor-attention__full-fine-tuning__sick-e__seed2.json"
    ]


def test_every_profile_stage_names_known_comparisons_and_data_sets(monkeypatch):
    for name in quality.PROFILES:
        assert quality.profile_stages(name)  # raises on an unknown name
    gpu = quality.PROFILES["gpu"]
    monkeypatch.setitem(quality.PROFILES, "gpu", {**gpu, "stage_seeds": (None, 3)})
    with pytest.raises(ValueError, match="one entry per stage"):
        quality.profile_stages("gpu")
    bad = {**quality.PROFILES["cpu-full"], "stages": ((("comateformer", ("stsb", "qqp")),),)}
    monkeypatch.setitem(quality.PROFILES, "cpu-full", bad)
    with pytest.raises(ValueError, match=r"'comateformer' has no data set \['qqp'\]"):
        quality.profile_stages("cpu-full")
    monkeypatch.setitem(quality.PROFILES, "cpu-full", {**bad, "stages": ((("nope", ("stsb",)),),)})
    with pytest.raises(ValueError, match="unknown comparison 'nope'"):
        quality.profile_stages("cpu-full")


def _write_run_file(folder: Path, run_id: str) -> None:
    (folder / "runs").mkdir(parents=True, exist_ok=True)
    (folder / "runs" / f"{run_id}.json").write_text("{}")


def test_list_prints_every_planned_run_with_counts_and_trains_nothing(tmp_path, capsys):
    done = ["cross-encoder__cross-encoder__stsb__seed0", "comateformer__plain-backbone__mrpc__seed1"]
    for run_id in done:
        _write_run_file(tmp_path, run_id)
    argv = ["--profile", "cpu-full", "--only", "cross-encoder", "comateformer", "--seeds", "0", "1"]
    quality.main([*argv, "--list", "--output_dir", str(tmp_path)])
    lines = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("#")]
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


def test_max_runs_stops_after_that_many_trained_runs_and_resumes(tmp_path, monkeypatch):
    monkeypatch.setattr(quality, "missing_data", lambda runs: [])  # training is faked: no data read
    trained = []

    def fake_run_one(argv: list, launcher: str, output_dir: Path) -> dict:
        trained.append(argv[argv.index("--model") + 1])
        return {"validation_accuracy": 80.0}

    monkeypatch.setattr(quality, "run_one", fake_run_one)
    monkeypatch.setattr(quality, "environment", lambda: {"hardware": {}, "versions": {}, "git_commit": "x"})
    only = ["cross-encoder", "siamese-esim"]
    argv = [
        "--profile",
        "cpu-full",
        "--only",
        *only,
        "--datasets",
        "sick-e",
        "--seeds",
        "0",
        "--output_dir",
        str(tmp_path),
    ]
    planned = [r.id for r in quality.plan_runs("cpu-full", (0,), datasets=("sick-e",)) if r.comparison.name in only]
    assert len(planned) == 6
    quality.main([*argv, "--max_runs", "4"])
    assert sorted(p.stem for p in (tmp_path / "runs").iterdir()) == sorted(planned[:4])
    quality.main([*argv, "--max_runs", "4"])  # the two left
    assert sorted(p.stem for p in (tmp_path / "runs").iterdir()) == sorted(planned) and len(trained) == 6
    records = [json.loads((tmp_path / "runs" / f"{i}.json").read_text()) for i in planned]
    assert [r["baseline"] for r in records] == [True, True, False, False, False, False]
    assert [r["train_args"]["num_train_epochs"] for r in records] == [2, 3, 3, 3, 3, 3]


def test_a_failing_run_writes_no_file_the_grid_goes_on_and_the_command_fails_naming_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(quality, "missing_data", lambda runs: [])  # training is faked: no data read
    broken = {"esim + fa"}
    trained = []

    def fake_run_one(argv: list, launcher: str, output_dir: Path) -> dict:
        overrides = json.loads(argv[argv.index("--config_overrides") + 1])
        label = next(r.arm.label for r in runs if r.arm.overrides == overrides)
        if label in broken:
            raise RuntimeError("expected dtype c10::BFloat16")
        trained.append(label)
        return {"validation_accuracy": 80.0}

    monkeypatch.setattr(quality, "run_one", fake_run_one)
    monkeypatch.setattr(quality, "environment", lambda: {"hardware": {}, "versions": {}, "git_commit": "x"})
    argv = ["--profile", "cpu-full", "--only", "siamese-esim", "--datasets", "sick-e", "--seeds", "0"]
    esim = [c for c in quality.COMPARISONS if c.name == "siamese-esim"]
    runs = quality.plan_runs("cpu-full", (0,), esim, ("sick-e",))
    failing = [r.id for r in runs if r.arm.label in broken]
    assert len(failing) == 1 and len(runs) > 2 and runs[-1].arm.label not in broken
    with pytest.raises(SystemExit, match="1 run\\(s\\) failed") as stop:
        quality.main([*argv, "--output_dir", str(tmp_path)])
    assert failing[0] in str(stop.value)
    assert sorted(p.stem for p in (tmp_path / "runs").iterdir()) == sorted(r.id for r in runs if r.id != failing[0])
    printed = capsys.readouterr()
    assert f"FAILED {failing[0]}" in printed.out and "RuntimeError: expected dtype" in printed.err
    broken.clear()
    trained.clear()
    quality.main([*argv, "--output_dir", str(tmp_path)])  # resumes: only the failed run trains
    assert trained == ["esim + fa"] and len(list((tmp_path / "runs").iterdir())) == len(runs)


def test_time_budget_starts_no_run_that_would_end_past_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(quality, "missing_data", lambda runs: [])  # training is faked: no data read
    clock = [0.0]
    monkeypatch.setattr(quality.time, "time", lambda: clock[0])

    def fake_run_one(argv: list, launcher: str, output_dir: Path) -> dict:
        clock[0] += 40.0  # every run takes 40 s
        return {"validation_accuracy": 80.0}

    monkeypatch.setattr(quality, "run_one", fake_run_one)
    monkeypatch.setattr(quality, "environment", lambda: {"hardware": {}, "versions": {}, "git_commit": "x"})
    argv = ["--profile", "cpu-full", "--only", "siamese-esim", "--datasets", "sick-e", "--seeds", "0", "1"]
    quality.main([*argv, "--output_dir", str(tmp_path), "--time_budget_s", "100"])
    # runs end at 40 and 80 s; a third would end at 120 > 100
    assert len(list((tmp_path / "runs").iterdir())) == 2
    assert "stopped after 2 runs: the next could end past --time_budget_s" in capsys.readouterr().out


WORKER_ARGV = ["--profile", "cpu-full", "--only", "cross-encoder", "siamese-esim", "--datasets", "sick-e"]


def _worker_plan(seed: int) -> list:
    only = ("cross-encoder", "siamese-esim")
    return [r.id for r in quality.plan_runs("cpu-full", (seed,), datasets=("sick-e",)) if r.comparison.name in only]


def test_a_worker_claims_each_run_and_skips_the_runs_another_worker_has(tmp_path, monkeypatch):
    monkeypatch.setattr(quality, "missing_data", lambda runs: [])  # training is faked: no data read
    runs_dir = tmp_path / "runs"
    trained, failing = [], []

    def fake_run_one(argv: list, launcher: str, output_dir: Path) -> dict:
        seed = argv[argv.index("--seed") + 1]
        mine = [c for c in runs_dir.glob("*.claim") if c.read_text() == str(os.getpid())]
        assert len(mine) == 1 and mine[0].name.endswith(f"seed{seed}.json.claim")  # held while it trains
        run_id = mine[0].name.removesuffix(".json.claim")
        if run_id in failing:
            raise RuntimeError("training failed")
        trained.append(run_id)
        return {"validation_accuracy": 80.0}

    monkeypatch.setattr(quality, "run_one", fake_run_one)
    monkeypatch.setattr(quality, "environment", lambda: {"hardware": {}, "versions": {}, "git_commit": "x"})
    planned = _worker_plan(0)
    assert len(planned) == 6
    runs_dir.mkdir()
    taken = runs_dir / f"{planned[1]}.json.claim"  # another worker trains this run
    taken.write_text("1")
    real_claimed = quality.claimed

    @contextlib.contextmanager
    def racing_claimed(path: Path):  # another worker finishes planned[2] between the check and the claim
        if path.name == f"{planned[2]}.json":
            path.write_text("{}")
        with real_claimed(path) as owned:
            yield owned

    monkeypatch.setattr(quality, "claimed", racing_claimed)
    argv = [*WORKER_ARGV, "--output_dir", str(tmp_path)]
    quality.main([*argv, "--seeds", "0", "--worker", "--workers", "3"])
    assert trained == [planned[0], planned[3], planned[4], planned[5]]
    names = sorted(p.name for p in runs_dir.iterdir())
    done = [f"{planned[i]}.json" for i in (0, 2, 3, 4, 5)]
    assert names == sorted([*done, taken.name])
    assert taken.read_text() == "1" and (runs_dir / f"{planned[2]}.json").read_text() == "{}"
    # a run whose training raises leaves its claim removed and no run file; the worker goes on with the others
    monkeypatch.setattr(quality, "claimed", real_claimed)
    failing.append(_worker_plan(1)[1])
    with pytest.raises(SystemExit, match=f"1 run\\(s\\) failed.*{failing[0]}"):
        quality.main([*argv, "--seeds", "1", "--worker"])
    assert sorted(p.name for p in runs_dir.glob("*.claim")) == [taken.name]
    others = {f"{run_id}.json" for run_id in _worker_plan(1) if run_id not in failing}
    assert {p.name for p in runs_dir.iterdir()} - set(names) == others and len(others) == 5


def test_workers_adapt_first_then_start_that_many_workers_with_the_deadline(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(quality, "missing_data", lambda runs: [])  # training is faked: no data read
    events, popens, codes = [], [], []
    runs_dir = tmp_path / "runs"

    class FakePopen:
        def __init__(self, command: list, cwd=None, env=None):
            events.append("popen")
            popens.append((command, cwd, env))

        def wait(self) -> int:
            (runs_dir / "x.json.claim").write_text("7")  # a killed worker's claim
            code = codes.pop(0) if codes else -signal.SIGTERM
            if code == "sigterm":
                os.kill(os.getpid(), signal.SIGTERM)
            return code

        def poll(self) -> None:
            return None

        def terminate(self) -> None:
            events.append("terminate")

    def fake_adapted(backbone: str, dataset: str, output_dir: Path) -> Path:
        events.append(("adapt", backbone, dataset))
        return output_dir / "adapted" / dataset

    def no_training(*args):
        raise AssertionError("the parent trains nothing")

    monkeypatch.setattr(quality.subprocess, "Popen", FakePopen)
    monkeypatch.setattr(quality, "adapted_backbone", fake_adapted)
    monkeypatch.setattr(quality, "run_one", no_training)
    monkeypatch.setattr(quality, "environment", no_training)
    monkeypatch.setattr(quality.os, "cpu_count", lambda: 16)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    arms = ["full fine-tuning", "full fine-tuning (adapted backbone)"]
    argv = ["--profile", "cpu-full", "--only", "neighbor-attention", "--arms", *arms, "--seeds", "0", "1"]
    argv += ["--time_budget_s", "100", "--output_dir", str(tmp_path), "--workers", "3"]
    runs_dir.mkdir()
    stale = runs_dir / "neighbor-attention__full-fine-tuning__sick-e__seed0.json.claim"
    stale.write_text("1")
    codes[:] = [0, 0, 0]
    before = time.time()
    quality.main(argv)
    assert events == [("adapt", "minilm", "sick-e"), "popen", "popen", "popen"]  # once for both seeds
    for command, cwd, env in popens:
        assert command[:2] == [sys.executable, str(REPO / "benchmarks" / "quality.py")] and cwd == quality.REPO
        assert "--worker" in command and "--time_budget_s" not in command and "100" not in command
        deadline = float(command[command.index("--deadline") + 1])
        assert before + 100 <= deadline <= time.time() + 100
        assert command[2:-3] == [a for a in argv if a not in ("--time_budget_s", "100")]
        assert env["OMP_NUM_THREADS"] == "5" and env["HF_HUB_OFFLINE"] == os.environ["HF_HUB_OFFLINE"]
    assert not list(runs_dir.glob("*.claim"))  # the stale claim and the killed worker's
    assert "0 runs trained by 3 workers" in capsys.readouterr().out
    # a worker that fails: the parent says so; a set OMP_NUM_THREADS is kept; no --deadline without a budget
    events.clear(), popens.clear()
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    codes[:] = [0, 1, 0]
    with pytest.raises(SystemExit, match="1 of 3 workers failed"):
        quality.main([a for a in argv if a not in ("--time_budget_s", "100")])
    assert len(popens) == 3 and all(env["OMP_NUM_THREADS"] == "2" for _, _, env in popens)
    assert all("--deadline" not in command for command, _, _ in popens)
    assert not list(runs_dir.glob("*.claim"))
    # at most one worker per pending run
    popens.clear()
    codes[:] = [0]
    quality.main([*argv[:-1], "4", "--arms", arms[0], "--seeds", "0"])
    assert len(popens) == 1
    # a SIGTERM (`timeout`'s) stops the workers and still removes their claims
    events.clear()
    codes[:] = ["sigterm"]
    handler = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit, match="stopped by signal"):
        quality.main([*argv[:-1], "4", "--arms", arms[0], "--seeds", "0"])
    assert events == ["popen", "terminate"] and signal.getsignal(signal.SIGTERM) == handler
    assert not list(runs_dir.glob("*.claim"))


@pytest.mark.integration
def test_two_real_workers_train_each_run_once(tmp_path):
    env = dict(os.environ, HF_HOME=str(REPO / ".hf_home"), TOKENIZERS_PARALLELISM="false")
    env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    argv = ["--profile", "cpu-small", "--backbone", "tiny-bert", "--only", "seaver", "--datasets", "synthetic"]
    argv += ["--seeds", "0", "--arms", "cross-encoder", "seaver", "--workers", "2", "--output_dir", str(tmp_path)]
    result = subprocess.run(
        [sys.executable, "benchmarks/quality.py", *argv],
        cwd=REPO,
        env=env,
        timeout=600,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    files = sorted((tmp_path / "runs").iterdir())
    assert [p.name for p in files] == [
        "seaver__cross-encoder__synthetic__seed0.json",
        "seaver__seaver__synthetic__seed0.json",
    ]
    for path in files:
        record = json.loads(path.read_text())
        assert isinstance(record["metrics"]["validation_spearman"], (int, float)) and record["backbone"] == "tiny-bert"
    assert "2 runs trained by 2 workers" in result.stdout and not list(tmp_path.rglob("*.claim"))


def test_arms_flag_keeps_only_the_named_arms_in_plan_order(tmp_path, capsys):
    labels = ["comateformer (mix)", "plain backbone"]
    argv = ["--profile", "cpu-full", "--only", "comateformer", "--seeds", "0", "--output_dir", str(tmp_path)]
    quality.main([*argv, "--arms", *labels, "--list"])
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines() if not line.startswith("#")][:-1]
    planned = [
        r.id for r in quality.plan_runs("cpu-full", (0,), [c for c in quality.COMPARISONS if c.name == "comateformer"])
    ]
    expected = [i for i in planned if i.split("__")[1] in {"comateformer--mix-", "plain-backbone"}]
    assert listed == expected and len(expected) == 6


def test_arms_whose_overrides_the_config_does_not_take_are_listed_and_never_trained(tmp_path, monkeypatch, capsys):
    arm = quality.Arm("bogus", "cross-encoder", {"not_a_field": 1})
    monkeypatch.setattr(quality, "COMPARISONS", [quality.Comparison("c", (arm,), ("stsb",))])
    argv = ["--profile", "cpu-medium", "--seeds", "0", "--output_dir", str(tmp_path)]
    quality.main([*argv, "--list"])
    assert "# 'c / bogus': ['not_a_field'] are not config parameters" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="not_a_field"):
        quality.main(argv)
    assert not any(tmp_path.iterdir())


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
    """Every step that trains, adapts, scores or starts a worker fails the test."""

    def trains(*args, **kwargs):
        raise AssertionError("nothing may train before the data check")

    import pairzoo.adapt_mlm

    for name in ("run_one", "expressiveness_metrics", "adapted_backbone"):
        monkeypatch.setattr(quality, name, trains)
    monkeypatch.setattr(quality, "environment", lambda: {"hardware": {}, "versions": {}, "git_commit": "x"})
    monkeypatch.setattr(pairzoo.adapt_mlm, "main", trains)
    monkeypatch.setattr(quality.subprocess, "Popen", trains)


def test_missing_esnli_files_stop_the_neighbor_attention_plan_before_anything_starts(tmp_path, monkeypatch, capsys):
    # the lent-GPU failure: a data folder with SICK but no e-SNLI, which every SICK-E neighbor-attention run scores
    data = _sick_folder(tmp_path / "data")
    monkeypatch.setenv("PAIRZOO_DATA_DIR", str(data))
    _no_training(monkeypatch)
    out = tmp_path / "out"
    argv = ["--profile", "gpu", "--only", "neighbor-attention", "--datasets", "sick-e", "--seeds", "0"]
    argv += ["--output_dir", str(out)]
    runs = len(quality.plan_runs("gpu", (0,), [c for c in quality.COMPARISONS if c.name == "neighbor-attention"]))
    first = "neighbor-attention__full-fine-tuning__sick-e__seed0"
    paths = ", ".join(repr(str(data / "e-SNLI" / name)) for name in ESNLI_DEV)
    expected = (
        f"split 'validation' of 'snli' needs {paths}, which are missing (read for [MASK] expressiveness by {runs} "
        f"runs, first {first})"
    )
    for extra in ([], ["--workers", "2"]):  # the parent refuses before any adaptation step or worker
        with pytest.raises(SystemExit) as stop:
            quality.main([*argv, *extra])
        message = str(stop.value.code)
        assert message.startswith(f"data the runs still to run read is missing: {expected}. ")
        assert "'sick-e'" not in message.split(first, 1)[1]  # SICK itself is there
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
    monkeypatch.setattr(quality, "run_one", lambda argv, launcher, output_dir: {"validation_accuracy": 50.0})
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
    with pytest.raises(SystemExit) as stop:
        quality.main(argv)
    assert stop.value.code == (
        f"data the runs still to run read is missing: split 'validation' of 'rte' needs {dev}, which is missing "
        "(read for evaluation and [MASK] expressiveness by 2 runs, first "
        "neighbor-attention__full-fine-tuning__rte__seed0). Add it to the data folder, or leave those runs out "
        "(--only, --datasets, --arms); nothing was started."
    )
    assert not out.exists()
    # no data folder at all: one line naming the splits and the folder
    monkeypatch.setenv("PAIRZOO_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(SystemExit, match=r"no data folder for 'rte' train, 'rte' validation: data folder '.*nowhere'"):
        quality.main(argv)
    quality.main([*argv, "--list"])
    assert "# missing data: no data folder for 'rte' train" in capsys.readouterr().out
    # runs already done read nothing: the same plan with both run files there passes the check
    for run_id in ("neighbor-attention__full-fine-tuning__rte__seed0", "neighbor-attention__bitfit__rte__seed0"):
        _write_run_file(out, run_id)
    quality.main(argv)
    assert "done in" in capsys.readouterr().out
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


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max_runs", "0"], None),
        (["--workers", "0"], None),
        (["--max_runs", "2", "--workers", "2"], "--max_runs and --workers"),
        (["--only", "siamese-bimpm", "--profile", "gpu"], "unknown comparison"),
        (["--only", "comateformer", "--datasets", "rte", "--profile", "cpu-full"], "--datasets"),
        (["--only", "comateformer", "--arms", "esim", "--profile", "cpu-full"], "--arms: unknown arm"),
    ],
)
def test_bad_quality_flags_stop_before_anything_is_written(tmp_path, argv, message, capsys):
    with pytest.raises(SystemExit, match=message):
        quality.main([*argv, "--list", "--output_dir", str(tmp_path)])
    if message is None:
        assert argv[0] in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


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
