"""The tuning stage: each arm's grid, selection on seed 0's dev score (best, ties to the earlier setting), the final
runs at the chosen setting, and verdicts against the tuned baseline."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from test_kg import _write_graph  # noqa: E402

from benchmarks import tune  # noqa: E402
from pairzoo.console import run_command  # noqa: E402
from pairzoo.training.kg import KgArguments, run_kg  # noqa: E402
from pairzoo.zoo.csr import KG_ARMS  # noqa: E402

COMPARISONS = {c.name: c for c in tune.tuned_comparisons()}


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


def test_wn18rr_arms_are_tuned_over_the_kg_recipes_rate_and_steps_against_their_router_free_arm() -> None:
    tri, bi = COMPARISONS["csr-kg-tri"], COMPARISONS["csr-kg-bi"]
    assert [a.label for a in tri.arms] == ["tri-hadamard", "tri-router", "tri-hadamard-router", "tri-router-reference"]
    assert [a.label for a in bi.arms] == ["bi", "bi-router"]
    assert all(arm.overrides == KG_ARMS[arm.label].overrides for arm in (*tri.arms, *bi.arms))
    for comparison in (tri, bi):
        assert all(KG_ARMS[arm.label].router_free == comparison.baseline.label for arm in comparison.arms[1:])
        grid = tune.grid_for(comparison, comparison.arms[-1], "wn18rr")
        assert [(s["learning_rate"], s["max_steps"]) for s in grid] == [
            (lr, steps) for lr in (3.33e-5, 1e-4, 3e-4) for steps in (1000, 2000)
        ]
    run = tune.TunedRun(tri, tri.arms[1], "wn18rr", 0, grid[3], "select")
    assert run.kg and run.id == "csr-kg-tri__tri-router__wn18rr__seed0__lr0.0001__steps2000"
    assert tune.setting_label(grid[3]) == "lr 0.0001, 2000 steps"


@pytest.mark.parametrize(
    ("name", "dataset", "arms", "best", "metric"),
    [
        (
            "seaver-absa",
            "absa-laptops",
            ("cross-encoder (transform)", "seaver (alpha 2)"),
            ("lr 0.0001, 5 epochs", "lr 2e-05, 2 epochs"),
            "validation_accuracy",
        ),
        (
            "csr-kg-tri",
            "wn18rr",
            ("tri-hadamard", "tri-router"),
            ("lr 0.0001, 2000 steps", "lr 3.33e-05, 1000 steps"),
            "validation_mrr",
        ),
    ],
)
def test_run_all_trains_the_grid_at_seed_0_then_the_chosen_setting_on_the_other_seeds(
    tmp_path, monkeypatch, name, dataset, arms, best, metric
) -> None:
    comparison = COMPARISONS[name]
    best = dict(zip(arms, best))  # a grid whose best setting is known, per arm
    trained = []

    def fake_train(run, backbone, runs_dir, env, threads):
        assert backbone == "minilm"
        grid = tune.grid_for(run.comparison, run.arm, run.dataset)
        setting = tune.setting_label(run.setting)
        score = 80.0 if setting == best[run.arm.label] else 70.0 + grid.index(run.setting)
        record = {
            "comparison": run.comparison.name,
            "arm": run.arm.label,
            "baseline": run.arm == run.comparison.baseline,
            "dataset": run.dataset,
            "seed": run.seed,
            "metrics": {metric: score + run.seed},
            "tuning": {"stage": run.stage, "setting": run.setting},
        }
        tune.write_json_atomic(runs_dir / f"{run.id}.json", record)
        trained.append((run.arm.label, run.stage, run.seed, setting))
        return record

    monkeypatch.setattr(tune, "train", fake_train)
    monkeypatch.setattr(tune, "environment", lambda threads: {})
    tune.run_all([comparison], (dataset,), arms, tmp_path, "minilm", workers=2)  # finals start as selections complete
    for label in arms:
        select = [t for t in trained if t[0] == label and t[1] == "select"]
        final = [t for t in trained if t[0] == label and t[1] == "final"]
        assert len(select) == 6 and {t[2] for t in select} == {0}
        assert sorted((t[2], t[3]) for t in final) == [(1, best[label]), (2, best[label])]
    count = len(trained)
    tune.run_all([comparison], (dataset,), arms, tmp_path, "minilm")  # resumes: nothing left to train
    assert len(trained) == count

    runs = tune.load_run_files(tmp_path)
    rows = {r["arm"]: r for r in tune.summarise_tuned(runs, [])}
    assert rows[arms[0]]["chosen"] == best[arms[0]]
    assert rows[arms[1]]["chosen"] == best[arms[1]]
    assert rows[arms[1]]["values"] == {0: 80.0, 1: 81.0, 2: 82.0}
    assert rows[arms[1]]["metric"] == metric.removeprefix("validation_")
    text = tune.tuned_markdown(list(rows.values()), ["CPU"], ["minilm"])
    kg_recipe = "for WN18RR (`csr-kg-*`) on top of `pairzoo.train_kg` at batch_size 256"
    assert (kg_recipe in text, "on top of the `cpu-full` recipe" in text) == (dataset == "wn18rr", dataset != "wn18rr")
    peer = ("at the fixed `cpu-full` recipe" in text, "WN18RR has no peer recipe" in text)
    assert peer == (dataset != "wn18rr", dataset == "wn18rr")
    grid = tune.grid_for(comparison, comparison.baseline, dataset)  # listed in the grid's order, not the files'
    assert list(rows[arms[1]]["grid"]) == [tune.setting_label(setting) for setting in grid]
    assert rows[arms[1]]["verdict"] == "tie"  # identical values on both arms
    assert rows[arms[0]]["verdict"] is None  # the baseline has no verdict of its own

    trained.clear()
    tune.run_all([comparison], (dataset,), arms, tmp_path / "one-worker", "minilm")  # one worker: the plan's order
    assert [(label, stage) for label, stage, _, _ in trained] == [
        *[(arms[0], "select")] * 6,
        *[(arms[0], "final")] * 2,  # an arm's final runs before the next arm's selection
        *[(arms[1], "select")] * 6,
        *[(arms[1], "final")] * 2,
    ]


def test_settings_train_only_the_runs_at_those_grid_settings(tmp_path, monkeypatch) -> None:
    comparison = COMPARISONS["seaver-absa"]
    arms = ("cross-encoder (transform)", "seaver (alpha 2)")
    trained = []

    def fake_train(run, backbone, runs_dir, env, threads):
        record = {"metrics": {"validation_accuracy": 70.0}, "tuning": {"stage": run.stage, "setting": run.setting}}
        tune.write_json_atomic(runs_dir / f"{run.id}.json", record)
        trained.append((run.arm.label, run.stage, run.seed, tune.setting_label(run.setting)))
        return record

    monkeypatch.setattr(tune, "train", fake_train)
    monkeypatch.setattr(tune, "environment", lambda threads: {})
    settings = ("lr 5e-05, 5 epochs", "lr 2e-05, 2 epochs")
    tune.run_all([comparison], ("absa-laptops",), arms, tmp_path, "minilm", settings=settings)
    assert trained == [(arm, "select", 0, s) for arm in arms for s in ("lr 2e-05, 2 epochs", "lr 5e-05, 5 epochs")]
    trained.clear()
    tune.run_all([comparison], ("absa-laptops",), arms, tmp_path, "minilm")  # the rest of the grid, then the finals
    assert len(trained) == 2 * (4 + 2) and {t[3] for t in trained if t[1] == "final"} == {"lr 2e-05, 2 epochs"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--only", "nope", "--list"], "--only: unknown comparison(s) ['nope']; known: ['comateformer', "),
        (["--only", "seaver-absa", "--arms", "esim"], "--arms: unknown arm(s) ['esim']; known: "),
        (
            ["--only", "seaver-absa", "--settings", "lr 2e-05, 2 epochs", "lr 0.001, 5 epochs", "--list"],
            "--settings: not in the grid(s) ['lr 0.001, 5 epochs']; known: ['lr 0.0001, 2 epochs', ",
        ),
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


def test_a_wn18rr_run_trains_in_train_kg_and_records_its_dev_ranking(tmp_path, monkeypatch) -> None:
    """A tuned WN18RR run (tiny-bert, a small graph, the recipe shrunk): `pairzoo.train_kg` at the recipe and the
    run's setting; its record's metrics are the dev MRR and Hits@k x100 of the same training run made directly."""
    data = _write_graph(tmp_path / "data")
    monkeypatch.setenv("PAIRZOO_DATA_DIR", data)
    monkeypatch.setattr(tune, "KG_RECIPE", {"batch_size": 4, "learning_rate": 1e-3, "max_length": 16, "max_steps": 2})
    comparison = COMPARISONS["csr-kg-tri"]
    arm = comparison.arms[1]
    setting = tune.grid_for(comparison, arm, "wn18rr")[3]
    assert setting == {"learning_rate": 1e-3, "max_steps": 4}
    run = tune.TunedRun(comparison, arm, "wn18rr", 1, setting, "select")
    record = tune.train_kg_and_record(run, "tiny-bert", {"hardware": {"cuda": None}})
    assert record["train_steps"] == 4 and record["hardware"] == {"cuda": None} and record["profile"] == "tuned-kg"
    assert record["train_args"] == {
        "batch_size": 4,
        "learning_rate": 1e-3,
        "max_length": 16,
        "max_steps": 4,
        "bf16": False,
    }
    assert (record["arm"], record["baseline"], record["seed"]) == ("tri-router", False, 1)
    direct = run_kg(
        KgArguments(
            backbone="tiny-bert",
            config_overrides=json.dumps(arm.overrides),
            data_dir=data,
            output_dir=str(tmp_path / "direct"),
            max_steps=4,
            batch_size=4,
            max_length=16,
            learning_rate=1e-3,
            seed=1,
            export=False,
        )
    )
    expected = {f"validation_{m}": 100 * direct["dev"][m] for m in tune.KG_METRICS}
    assert record["metrics"] == pytest.approx(expected, abs=1e-6)
    assert tune.run_score(record) == record["metrics"]["validation_mrr"]
