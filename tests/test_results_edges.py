"""Edge cases of turning run files into printed numbers: undefined metrics, duplicate or unlike runs of one arm, seed
sets that differ, the tuned selection (ties, an incomplete grid, final runs off the chosen setting), peer columns on
another backbone and KG runs of another recipe. Each is either reported correctly or a clear error before anything is
written."""

import json
import math
import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import report, tune  # noqa: E402
from pairzoo.hub_cards.results import chosen_runs, load_runs, summarise, verdict  # noqa: E402

GRID = [{"learning_rate": lr, "num_train_epochs": epochs} for lr in (2e-05, 5e-05, 0.0001) for epochs in (2, 5)]
PEERS = {"mrpc": {"metric": "accuracy", "mean": 73.61, "std": 0.38, "seeds": [0, 1, 2]}}


def _run(arm: str, seed: int, value: "float | None", baseline: bool = False, **fields: object) -> dict:
    """A run file as `benchmarks/quality.py` writes it (comparison `c`, MRPC accuracy, profile cpu-small)."""
    return {
        "comparison": "c",
        "arm": arm,
        "baseline": baseline,
        "model": "cross-encoder",
        "config_overrides": {},
        "dataset": "mrpc",
        "split": "validation",
        "seed": seed,
        "profile": "cpu-small",
        "backbone": "tiny-bert",
        "train_args": {"max_length": 32, "learning_rate": 5e-05},
        "metrics": {"validation_loss": 0.5, "validation_accuracy": value},
        "wall_seconds": 1.0,
        "hardware": {"cuda": None, "cpu_count": 2, "torch_threads": 2},
        "git_commit": "0123456789abcdef",
        **fields,
    }


def _baseline(values: "tuple[float, ...]" = (70.0, 71.0, 72.0)) -> list[dict]:
    return [_run("base", seed, value, baseline=True) for seed, value in enumerate(values)]


def _folder(path: Path, runs: list[dict]) -> Path:
    """`runs` written as the run files of a results folder at `path` (as JSON, so a NaN is written as `NaN`)."""
    (path / "runs").mkdir(parents=True)
    for i, run in enumerate(runs):
        (path / "runs" / f"{i:03d}.json").write_text(json.dumps(run))
    return path


@pytest.mark.parametrize("undefined", [None, float("nan")])
def test_a_seed_whose_metric_is_undefined_is_left_out_of_the_mean_and_named(tmp_path, undefined) -> None:
    folder = _folder(tmp_path, _baseline() + [_run("m", 0, undefined), _run("m", 1, 74.0), _run("m", 2, 76.0)])
    rows = {r["arm"]: r for r in summarise(load_runs(folder))}
    assert rows["m"]["seeds"] == [1, 2] and rows["m"]["undefined_seeds"] == [0]
    assert rows["m"]["mean"] == 75.0 and rows["m"]["delta"] == pytest.approx(75.0 - 71.0)
    assert rows["base"]["undefined_seeds"] == []
    assert "| c | mrpc | m | accuracy | 75.00 ± 1.41 (seeds 1, 2 only) (undefined at seed 0) | +4.00 |" in (
        report.quality_markdown(list(rows.values()))
    )


def test_a_main_metric_undefined_at_every_seed_is_a_clear_error_and_nothing_is_written(tmp_path) -> None:
    folder = _folder(tmp_path, _baseline() + [_run("m", seed, None) for seed in range(3)])
    with pytest.raises(ValueError, match=r"arm 'm' of comparison 'c' on 'mrpc': validation_accuracy is undefined"):
        report.main([str(folder), "--peers", str(tmp_path / "no-peers.json")])
    assert sorted(p.name for p in folder.iterdir()) == ["runs"]


def test_two_run_files_of_one_seed_are_an_error_not_counted_twice(tmp_path) -> None:
    folder = _folder(tmp_path, _baseline() + [_run("m", 0, 80.0), _run("m", 0, 80.0), _run("m", 1, 72.0)])
    with pytest.raises(ValueError, match=r"arm 'm' of comparison 'c' on 'mrpc': two run files of seed 0"):
        report.main([str(folder), "--peers", str(tmp_path / "no-peers.json")])
    assert sorted(p.name for p in folder.iterdir()) == ["runs"]


@pytest.mark.parametrize(
    ("field", "other"),
    [
        ("profile", "cpu-full"),
        ("backbone", "tiny-roberta"),
        ("train_args", {"max_length": 64, "learning_rate": 5e-05}),
        ("config_overrides", {"use_transform": True}),
        ("model", "seaver"),
    ],
)
def test_runs_of_one_arm_that_trained_otherwise_are_not_pooled_into_one_mean(tmp_path, field, other) -> None:
    """The model cards summarise a folder's runs of one profile and backbone; the report, a whole folder."""
    folder = _folder(tmp_path, _baseline() + [_run("m", 0, 80.0, **{field: other}), _run("m", 1, 72.0)])
    with pytest.raises(ValueError, match=rf"arm 'm' .*seed-0 and seed-1 runs differ in {field} "):
        summarise(load_runs(folder))


def test_two_baseline_arms_of_one_comparison_and_data_set_are_an_error() -> None:
    runs = _baseline() + [_run("other base", seed, 60.0, baseline=True) for seed in range(3)]
    with pytest.raises(ValueError, match="comparison 'c' on 'mrpc' has two baseline arms, 'base' and 'other base'"):
        summarise(runs + [_run("m", seed, 75.0) for seed in range(3)])


def test_an_arm_on_fewer_seeds_than_the_table_names_them_in_the_table_and_the_card_verdict() -> None:
    rows = {r["arm"]: r for r in summarise(_baseline() + [_run("m", 0, 75.0), _run("m", 1, 75.2)])}
    table = report.quality_markdown(list(rows.values()))
    assert "| c | mrpc | m | accuracy | 75.10 ± 0.14 (seeds 0, 1 only) | +4.10 | yes |" in table
    assert "| c | mrpc | base | accuracy | 71.00 ± 1.00 | baseline |  |" in table  # the table's seeds: not named
    sentence = verdict(rows["m"], rows["base"])
    assert "m (75.10 ± 0.14, 2 seeds) beat its baseline base (71.00 ± 1.00, 3 seeds)" in sentence


def _tuned(arm: str, seed: int, value: "float | None", setting: dict, stage: str, **fields: object) -> dict:
    """A `benchmarks/tune.py` run file of `arm` of seaver-absa on absa-laptops (its baseline: the transform
    cross-encoder) at `setting` of the encoder grid."""
    tuning = {"stage": stage, "setting": setting, "grid": GRID}
    baseline = arm == "cross-encoder (transform)"
    run = _run(arm, seed, value, baseline, comparison="seaver-absa", dataset="absa-laptops", profile="tuned-cpu-full")
    return {**run, "train_args": {"max_length": 128, **setting}, "tuning": tuning, **fields}


def _selection(arm: str, scores: "list[float | None]") -> list[dict]:
    return [_tuned(arm, 0, score, setting, "select") for score, setting in zip(scores, GRID)]


def test_ties_go_to_the_earlier_grid_setting_in_the_tuned_report_and_the_cards_alike() -> None:
    scores = [70.0, 72.0, 75.0, 75.0, 74.0, 75.0]  # settings 2, 3 and 5 tie: setting 2 (lr 5e-5, 2 epochs) wins
    runs = _selection("seaver (alpha 2)", scores)
    runs += [_tuned("seaver (alpha 2)", seed, 76.0 + seed, GRID[2], "final") for seed in (1, 2)]
    (row,) = tune.summarise_tuned(runs, [])
    assert row["chosen"] == "lr 5e-05, 2 epochs" and row["values"] == {0: 75.0, 1: 77.0, 2: 78.0}
    kept = chosen_runs(runs)
    assert {json.dumps(r["tuning"]["setting"]) for r in kept} == {json.dumps(GRID[2])}
    assert sorted(r["seed"] for r in kept) == [0, 1, 2]


@pytest.mark.parametrize("reverse", [False, True])
def test_final_runs_off_the_selected_setting_never_count(reverse) -> None:
    """After a re-selection the folder holds final runs at the old setting: neither the cards nor the tuned report
    count them, whatever the files' order."""
    runs = _selection("seaver (alpha 2)", [70.0, 80.0, 71.0, 72.0, 73.0, 74.0])  # selected: GRID[1]
    runs += [_tuned("seaver (alpha 2)", seed, 60.0, GRID[0], "final") for seed in (1, 2)]  # the old choice
    runs += [_tuned("seaver (alpha 2)", seed, 81.0, GRID[1], "final") for seed in (1, 2)]
    runs = runs[::-1] if reverse else runs
    kept = chosen_runs(runs)
    assert sorted((r["seed"], r["metrics"]["validation_accuracy"]) for r in kept) == [(0, 80.0), (1, 81.0), (2, 81.0)]
    (row,) = tune.summarise_tuned(runs, [])
    assert row["chosen"] == "lr 2e-05, 5 epochs" and sorted(row["values"].values()) == [80.0, 81.0, 81.0]


def test_an_incomplete_grid_chooses_nothing_even_with_a_final_run_written() -> None:
    runs = _selection("seaver (alpha 2)", [70.0, 80.0, 71.0, 72.0, 73.0])  # the last setting has not run
    runs += [_tuned("seaver (alpha 2)", 1, 81.0, GRID[1], "final")]
    runs += [_tuned("cross-encoder (transform)", 0, 60.0, GRID[0], "select")]
    assert chosen_runs(runs) == []
    rows = {r["arm"]: r for r in tune.summarise_tuned(runs, [])}
    assert rows["seaver (alpha 2)"]["chosen"] is None and rows["seaver (alpha 2)"]["values"] == {}
    assert rows["seaver (alpha 2)"]["verdict"] == "open"
    assert "| seaver (alpha 2) |" in tune.tuned_markdown(list(rows.values()), ["CPU"], ["minilm"])
    assert "selection incomplete" in tune.tuned_markdown(list(rows.values()), ["CPU"], ["minilm"])


def test_an_undefined_selection_score_is_never_chosen() -> None:
    runs = _selection("seaver (alpha 2)", [float("nan"), None, 71.0, 72.0, 73.0, 70.0])
    runs += [_tuned("seaver (alpha 2)", seed, 74.0, GRID[4], "final") for seed in (1, 2)]
    assert tune.run_score(runs[0]) is None
    (row,) = tune.summarise_tuned(runs, [])
    assert row["chosen"] == "lr 0.0001, 2 epochs"
    assert "lr 2e-05, 2 epochs: undefined" in tune.tuned_markdown([row], ["CPU"], ["minilm"])
    assert {json.dumps(r["tuning"]["setting"]) for r in chosen_runs(runs)} == {json.dumps(GRID[4])}


def test_tuning_runs_of_one_arm_recording_different_grids_are_an_error() -> None:
    runs = _selection("seaver (alpha 2)", [70.0, 80.0, 71.0, 72.0, 73.0, 74.0])
    runs[1]["tuning"] = {**runs[1]["tuning"], "grid": GRID[:2]}
    with pytest.raises(ValueError, match="the tuning runs of arm 'seaver \\(alpha 2\\)' .* record different grids"):
        chosen_runs(runs)


def test_tuned_report_verdicts_wait_for_three_seeds_on_both_sides() -> None:
    base = _selection("cross-encoder (transform)", [70.0, 71.0, 72.0, 73.0, 74.0, 75.0])
    base += [_tuned("cross-encoder (transform)", 1, 75.5, GRID[5], "final")]  # seed 2 still to run
    arm = _selection("seaver (alpha 2)", [70.0, 71.0, 72.0, 73.0, 74.0, 90.0])
    arm += [_tuned("seaver (alpha 2)", seed, 90.0 + seed, GRID[5], "final") for seed in (1, 2)]
    rows = {r["arm"]: r for r in tune.summarise_tuned(base + arm, [])}
    assert rows["seaver (alpha 2)"]["verdict"] == "open"
    base += [_tuned("cross-encoder (transform)", 2, 74.5, GRID[5], "final")]
    rows = {r["arm"]: r for r in tune.summarise_tuned(base + arm, [])}
    assert rows["seaver (alpha 2)"]["verdict"] == "gain"


def test_the_tuned_report_names_a_bad_run_file_and_an_unknown_arm(tmp_path) -> None:
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "broken.json").write_text("{")
    with pytest.raises(ValueError, match=r"run file '.*broken\.json' is not valid JSON"):
        tune.report(tmp_path, None)
    (tmp_path / "runs" / "broken.json").unlink()
    run = _tuned("no such arm", 0, 70.0, GRID[0], "select")
    (tmp_path / "runs" / "unknown.json").write_text(json.dumps(run))
    with pytest.raises(ValueError, match="arm 'no such arm' of comparison 'seaver-absa': no such arm"):
        tune.report(tmp_path, None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]


def _peer_rows(backbone: str) -> list[dict]:
    runs = [_run("base", s, 70.0 + s, True, profile="cpu-full", backbone=backbone) for s in range(3)]
    return summarise(runs + [_run("m", s, 75.0 + s, profile="cpu-full", backbone=backbone) for s in range(3)])


def test_peer_columns_join_the_data_set_and_metric_on_minilm_and_stay_out_on_another_backbone() -> None:
    text = report.comparison_markdown(_peer_rows("minilm"), PEERS, "peers.json")
    assert "| mrpc | m |  | accuracy | 76.00 ± 1.00 | +5.00 * | 73.61 ± 0.38 | +2.39 * |" in text
    text = report.comparison_markdown(_peer_rows("minilm"), {"mrpc": {**PEERS["mrpc"], "metric": "f1"}}, "p.json")
    assert "| mrpc | m |  | accuracy | 76.00 ± 1.00 | +5.00 * |  |  |" in text  # another metric: no peer number
    text = report.comparison_markdown(_peer_rows("tiny-bert"), PEERS, "peers.json")
    assert "73.61" not in text and "peer CrossEncoder" not in text
    assert "Peer columns left out: the runs are on `tiny-bert`" in text


def _kg_run(folder: Path, arm: str, seed: int, mrr: float, **args: object) -> None:
    run_dir = folder / f"{arm}__seed{seed}"
    run_dir.mkdir(parents=True)
    recipe = {"backbone": "tiny-bert", "max_steps": 4, "batch_size": 2, "learning_rate": 5e-05, "max_length": 16}
    dev = {"mrr": mrr, "hits@1": mrr, "hits@3": mrr, "hits@10": mrr, "num_entities": 10}
    metrics = {"args": {**recipe, "seed": seed, "output_dir": str(run_dir), **args}, "dev": dev, "train_steps": 4}
    (run_dir / "metrics.json").write_text(json.dumps(metrics))


def test_kg_runs_of_another_recipe_are_an_error_not_one_table(tmp_path) -> None:
    for seed in range(2):
        _kg_run(tmp_path, "bi", seed, 0.2 + seed / 100, config_overrides='{"use_router": false}')
        _kg_run(tmp_path, "bi-router", seed, 0.3, config_overrides='{"use_router": true}')
    table = report.kg_markdown(report.load_kg_runs(tmp_path))
    assert "| bi-router | 2 | 4 / 4 |" in table and f"| {100 * (0.3 - statistics.mean([0.2, 0.21])):+.2f} |" in table
    _kg_run(tmp_path, "bi", 2, 0.2, config_overrides='{"use_router": false}', max_length=64)
    with pytest.raises(ValueError, match=r"KG run bi__seed2 trained with other \['max_length'\]"):
        report.kg_markdown(report.load_kg_runs(tmp_path))


def test_json_nan_in_a_run_file_is_read_as_undefined(tmp_path) -> None:
    folder = _folder(tmp_path, _baseline() + [_run("m", 0, 74.0), _run("m", 1, float("nan"))])
    assert "NaN" in (folder / "runs" / "004.json").read_text()
    (row,) = [r for r in summarise(load_runs(folder)) if r["arm"] == "m"]
    assert row["values"] == [74.0] and row["undefined_seeds"] == [1] and not math.isnan(row["mean"])


@pytest.mark.parametrize(("field", "other"), [("profile", "cpu-full"), ("backbone", "tiny-roberta")])
def test_a_results_folder_mixing_profiles_or_backbones_across_arms_is_an_error(tmp_path, field, other) -> None:
    folder = _folder(tmp_path, _baseline() + [_run("m", seed, 75.0, **{field: other}) for seed in range(3)])
    with pytest.raises(ValueError, match=rf"come from several {field}s \['.*', '.*'\]"):
        report.main([str(folder), "--peers", str(tmp_path / "no-peers.json")])
    assert sorted(p.name for p in folder.iterdir()) == ["runs"]
