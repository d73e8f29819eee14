"""The tuning stage: each arm's grid, selection on seed 0's dev score (best, ties to the earlier setting), the final
runs at the chosen setting, and verdicts against the tuned baseline."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import tune  # noqa: E402
from pairzoo.console import run_command  # noqa: E402

COMPARISONS = {c.name: c for c in tune.available_comparisons()}


def _arm(comparison: str, label: str):
    return next(a for a in COMPARISONS[comparison].arms if a.label == label)


def test_select_picks_the_best_setting_and_breaks_ties_towards_the_earlier_one() -> None:
    grid = [{"learning_rate": lr, "num_train_epochs": 2} for lr in (1, 2, 3, 4)]
    assert tune.select({0: 70.0, 1: 75.0, 2: 71.0, 3: 74.0}, grid) == grid[1]
    assert tune.select({0: 70.0, 1: 75.0, 2: 75.0, 3: 74.0}, grid) == grid[1]
    assert tune.select({0: None, 1: 60.0, 2: None, 3: 59.0}, grid) == grid[1]
    assert tune.select({0: 70.0, 1: 75.0}, grid) is None  # selection waits for the whole grid
    assert tune.select({0: None, 1: None, 2: None, 3: None}, grid) is None


def test_encoder_arms_share_the_grid_and_own_rate_arms_are_tuned_around_their_rate() -> None:
    comparison = COMPARISONS["seaver-absa"]
    grids = [tune.grid_for(comparison, arm, "absa-laptops") for arm in comparison.arms]
    assert all(grid == grids[0] for grid in grids)
    assert {(s["learning_rate"], s["num_train_epochs"]) for s in grids[0]} == {
        (lr, e) for lr in (2e-5, 5e-5, 1e-4) for e in (2, 5)
    }
    re2 = COMPARISONS["siamese-re2"]
    own = {(s["learning_rate"], s["num_train_epochs"]) for s in tune.grid_for(re2, re2.baseline, "sick-e")}
    assert own == {(lr, e) for lr in (3.33e-4, 1e-3, 3e-3) for e in (3, 6)}
    # epochs from the base profile's run: its comparison arguments give neighbor attention the paper's 5
    neighbor = COMPARISONS["neighbor-attention"]
    bitfit = _arm("neighbor-attention", "bitfit")
    own = {(s["learning_rate"], s["num_train_epochs"]) for s in tune.grid_for(neighbor, bitfit, "sick-e")}
    assert own == {(lr, e) for lr in (3.33e-4, 1e-3, 3e-3) for e in (5, 10)}


def test_run_all_trains_the_grid_at_seed_0_then_the_chosen_setting_on_the_other_seeds(tmp_path, monkeypatch) -> None:
    comparison = COMPARISONS["seaver-absa"]
    arms = ("cross-encoder (transform)", "seaver (alpha 2)")
    best = {arms[0]: (1e-4, 5), arms[1]: (2e-5, 2)}  # a grid whose best setting is known, per arm
    trained = []

    def fake_train(run, backbone, runs_dir, env, threads):
        assert backbone == "minilm"
        setting = (run.setting["learning_rate"], run.setting["num_train_epochs"])
        score = 80.0 if setting == best[run.arm.label] else 70.0 + run.setting["num_train_epochs"]
        record = {
            "comparison": run.comparison.name,
            "arm": run.arm.label,
            "baseline": run.arm == run.comparison.baseline,
            "dataset": run.dataset,
            "seed": run.seed,
            "metrics": {"validation_accuracy": score + run.seed},
            "tuning": {"stage": run.stage, "setting": run.setting},
        }
        tune.write_json_atomic(runs_dir / f"{run.id}.json", record)
        trained.append((run.arm.label, run.stage, run.seed, setting))
        return record

    monkeypatch.setattr(tune, "train", fake_train)
    monkeypatch.setattr(tune, "environment", lambda threads: {})
    tune.run_all(
        [comparison], ("absa-laptops",), arms, tmp_path, "minilm", workers=2
    )  # finals start as selections complete
    for label in arms:
        select = [t for t in trained if t[0] == label and t[1] == "select"]
        final = [t for t in trained if t[0] == label and t[1] == "final"]
        assert len(select) == 6 and {t[2] for t in select} == {0}
        assert sorted((t[2], t[3]) for t in final) == [(1, best[label]), (2, best[label])]
    count = len(trained)
    tune.run_all([comparison], ("absa-laptops",), arms, tmp_path, "minilm")  # resumes: nothing left to train
    assert len(trained) == count

    runs = tune.load_run_files(tmp_path)
    rows = {r["arm"]: r for r in tune.summarise_tuned(runs, [])}
    assert rows[arms[0]]["chosen"] == "lr 0.0001, 5 epochs"
    assert rows[arms[1]]["chosen"] == "lr 2e-05, 2 epochs"
    assert rows[arms[1]]["values"] == {0: 80.0, 1: 81.0, 2: 82.0}
    grid = tune.grid_for(comparison, comparison.baseline, "absa-laptops")  # listed in the grid's order, not the files'
    assert list(rows[arms[1]]["grid"]) == [tune.setting_label(setting) for setting in grid]
    assert rows[arms[1]]["verdict"] == "tie"  # identical values on both arms
    assert rows[arms[0]]["verdict"] is None  # the baseline has no verdict of its own

    trained.clear()
    tune.run_all(
        [comparison], ("absa-laptops",), arms, tmp_path / "one-worker", "minilm"
    )  # one worker: the plan's order
    assert [(label, stage) for label, stage, _, _ in trained] == [
        *[(arms[0], "select")] * 6,
        *[(arms[0], "final")] * 2,  # an arm's final runs before the next arm's selection
        *[(arms[1], "select")] * 6,
        *[(arms[1], "final")] * 2,
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--only", "nope", "--list"], "--only: unknown comparison(s) ['nope']; known: ['comateformer', "),
        (["--only", "seaver-absa", "--arms", "esim"], "--arms: unknown arm(s) ['esim']; known: "),
        (["--workers", "0"], "--workers must be an integer >= 1, got 0."),
        (["--time_budget_s", "0"], "--time_budget_s must be an integer >= 1, got 0."),
        (["--report"], "no run files under "),
    ],
)
def test_bad_tune_input_prints_one_line_and_writes_nothing(tmp_path, argv, message, capsys) -> None:
    assert run_command("tune.py", tune.main, [*argv, "--output_dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tune.py: error: {message}") and err.count("\n") == 1
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("values", "base", "expected"),
    [
        ([80.0, 81.0, 82.0], [70.0, 71.0, 72.0], "gain"),
        ([70.0, 71.0, 72.0], [80.0, 81.0, 82.0], "loss"),
        ([80.0, 81.0, 82.0], [79.0, 80.5, 83.0], "tie"),
        ([80.0, 81.0], [70.0, 71.0, 72.0], "open"),
    ],
)
def test_verdict_needs_a_difference_beyond_the_summed_seed_spread(values, base, expected) -> None:
    assert tune.verdict(values, base) == expected


def _tuned_record(arm: str, baseline: bool, seed: int, setting: dict, stage: str, score: float, backbone: str) -> dict:
    return {
        "comparison": "seaver-absa",
        "arm": arm,
        "baseline": baseline,
        "dataset": "absa-laptops",
        "seed": seed,
        "backbone": backbone,
        "metrics": {"validation_accuracy": score},
        "tuning": {"stage": stage, "setting": setting},
    }


def test_a_folder_of_another_backbone_is_refused_and_the_report_contrasts_the_same_backbone(tmp_path, capsys) -> None:
    """Tuning on `--backbone mpnet-base` into a folder of MiniLM runs is refused (one line, nothing written); the
    report's peer-recipe column reads only the peer-recipe runs on the tuned runs' backbone, and says which it is,
    and names each machine the runs trained on (TF32 where a GPU ran its float32 matrix products so)."""
    comparison = COMPARISONS["seaver-absa"]
    arms = {"cross-encoder (transform)": True, "seaver (alpha 2)": False}
    grid = tune.grid_for(comparison, comparison.baseline, "absa-laptops")
    runs = tmp_path / "tuned" / "runs"
    runs.mkdir(parents=True)
    for label, baseline in arms.items():
        arm = _arm("seaver-absa", label)
        for i, setting in enumerate(grid):
            run = tune.TunedRun(comparison, arm, "absa-laptops", 0, setting, "select")
            record = _tuned_record(label, baseline, 0, setting, "select", 70.0 + i, "mpnet-base")
            if not baseline:  # the method's grid trained on a GPU with TF32 matrix products, the rest on CPU
                record["hardware"] = {"cuda": "NVIDIA H100 80GB HBM3", "float32_matmul": "tf32"}
            tune.write_json_atomic(runs / f"{run.id}.json", record)
        for seed in (1, 2):
            run = tune.TunedRun(comparison, arm, "absa-laptops", seed, grid[-1], "final")
            record = _tuned_record(label, baseline, seed, grid[-1], "final", 75.0 + seed, "mpnet-base")
            tune.write_json_atomic(runs / f"{run.id}.json", record)
    before = sorted(p.name for p in runs.iterdir())
    for extra in (["--list"], []):
        argv = ["--only", "seaver-absa", "--datasets", "absa-laptops", "--output_dir", str(tmp_path / "tuned"), *extra]
        assert run_command("tune.py", tune.main, argv) == 2  # the default backbone, MiniLM
        err = capsys.readouterr().err
        assert err.startswith("tune.py: error: --backbone minilm: ") and "holds runs on 'mpnet-base'" in err
        assert err.count("\n") == 1
    assert sorted(p.name for p in runs.iterdir()) == before

    peers = tmp_path / "peer" / "runs"
    peers.mkdir(parents=True)
    for backbone, score in (("minilm", 50.0), ("mpnet-base", 60.0)):
        for label, baseline in arms.items():
            for seed in (0, 1, 2):
                record = {
                    **_tuned_record(label, baseline, seed, {}, "", score + seed, backbone),
                    "profile": "cpu-full",
                }
                del record["tuning"]
                (peers / f"{backbone}-{label}-{seed}.json").write_text(json.dumps(record))
    text = tune.report(tmp_path / "tuned", None, tmp_path / "peer")
    assert "backbone `mpnet-base`" in text and "minilm" not in text
    assert "Trained on: CPU, NVIDIA H100 80GB HBM3 (float32 with TF32 matrix products)." in text
    rows = json.loads((tmp_path / "tuned" / "summary.json").read_text())
    assert all(row["peer_recipe"] == {"0": 60.0, "1": 61.0, "2": 62.0} for row in rows)
