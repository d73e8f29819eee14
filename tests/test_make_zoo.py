"""`make zoo` (pairzoo.make_zoo): plan, one real tiny run end to end, resume, and bad flags."""

import json

import pytest
from huggingface_hub import ModelCard

from pairzoo import make_zoo
from pairzoo.make_zoo import PEER_RECIPE, ZOO, ZooEntry, entry_args

TINY = ZooEntry(
    "tiny-cross-encoder-synthetic",
    "cross-encoder",
    "synthetic",
    {"pooling": "mean"},
    {"max_train_samples": 16, "max_eval_samples": 16, "max_steps": 2, "max_length": 32},
)


def test_every_method_has_one_entry_with_the_peer_recipe_or_its_own_schedule():
    assert sorted({entry.model for entry in ZOO}) == [
        "comateformer",
        "cross-encoder",
        "csr",
        "neighbor-attention",
        "seaver",
        "siamese-matcher",
    ]
    assert len({entry.name for entry in ZOO}) == len(ZOO)
    by_name = {entry.name: entry for entry in ZOO}
    stsb = entry_args(by_name["cross-encoder-stsb"], "cpu")
    assert stsb == {**PEER_RECIPE, "num_train_epochs": 1}
    assert entry_args(by_name["comateformer-sick-e"], "cpu")["num_train_epochs"] == 2
    siamese = entry_args(by_name["siamese-re2-sfa-sick-e"], "cpu")
    assert siamese["learning_rate"] == 1e-3 and siamese["num_train_epochs"] == 3
    assert entry_args(by_name["cross-encoder-stsb"], "gpu")["num_train_epochs"] == 3
    # neighbor attention: the paper's 5 epochs at the learning rate of the cpu-full arm that describes it
    neighbor = entry_args(by_name["neighbor-attention-sick-e"], "cpu")
    assert neighbor["num_train_epochs"] == 5 and neighbor["learning_rate"] == 3e-3


def _bench_run(arm: str, baseline: bool, overrides: dict, seed: int, value: float) -> dict:
    """A run file of the cross-encoder on synthetic (tiny-bert, cpu-full), as benchmarks/quality.py writes one."""
    return {
        "comparison": "tiny",
        "arm": arm,
        "baseline": baseline,
        "model": "cross-encoder",
        "config_overrides": overrides,
        "dataset": "synthetic",
        "split": "validation",
        "seed": seed,
        "profile": "cpu-full",
        "backbone": "tiny-bert",
        "train_args": {"num_train_epochs": 1},
        "metrics": {"validation_spearman": value},
        "wall_seconds": 1.0,
        "hardware": {"cuda": None, "cpu_count": 2, "torch_threads": 1},
        "git_commit": "0123456789ab",
    }


def test_a_tiny_zoo_trains_exports_validates_without_pairzoo_and_resumes(tmp_path, monkeypatch, capsys, caplog):
    monkeypatch.setattr(make_zoo, "ZOO", (TINY,))
    # committed benchmark runs of the entry's configuration (mean pooling) and of its baseline arm (cls pooling)
    runs = tmp_path / "bench" / "cpu-full" / "runs"
    runs.mkdir(parents=True)
    for seed, (method, base) in enumerate([(40.0, 30.0), (42.0, 31.0)]):
        (runs / f"m{seed}.json").write_text(json.dumps(_bench_run("mean", False, {"pooling": "mean"}, seed, method)))
        (runs / f"b{seed}.json").write_text(json.dumps(_bench_run("cls", True, {"pooling": "cls"}, seed, base)))
    # a tuned folder comparing other arms only is passed over; one comparing the entry's arm is preferred
    for folder, arms in (("tuned-a", ("other", "cls")), ("tuned-b", ("mean", "cls"))):
        tuned = tmp_path / "bench" / folder / "runs"
        tuned.mkdir(parents=True)
        for arm, value in zip(arms, (50.0, 20.0)):
            for seed in (0, 1, 2):
                stage = "select" if seed == 0 else "final"
                overrides = {"pooling": arm} if arm != "other" else {"pooling": "mean", "use_transform": True}
                run = _bench_run(arm, arm == "cls", overrides, seed, value + seed)
                run |= {"profile": "tuned-cpu-full", "tuning": {"stage": stage, "setting": {"learning_rate": 1e-4}}}
                (tuned / f"{arm}{seed}.json").write_text(json.dumps(run))
    monkeypatch.setattr(make_zoo, "BENCHMARK_RESULTS", tmp_path / "bench")
    tmp_path = tmp_path / "zoo"
    argv = ["--output_dir", str(tmp_path), "--backbone", "tiny-bert"]
    assert make_zoo.main(argv) == 0
    first = capsys.readouterr().out
    assert "[1/1] tiny-cross-encoder-synthetic: trained in" in caplog.text  # the progress line, logged
    records = json.loads((tmp_path / "zoo.json").read_text())
    assert [r["entry"] for r in records] == [TINY.name]
    record = records[0]
    assert record["metric"] == "spearman" and record["pipeline"] == "conditional-similarity"
    assert "AutoModel" in record["loaded_without_pairzoo"]
    assert len(record["example_outputs"]) == 2 and all("score" in o for o in record["example_outputs"])
    # the card: this export's own dev number in model-index, the benchmark comparison with the baseline arm beside it
    assert [(r["arm"], r["baseline_arm"], r["delta"]) for r in record["baseline"]] == [("mean", "cls", 30.0)]
    assert "mean +30.00 vs cls, 3 seeds" in first
    card = ModelCard.load(tmp_path / TINY.name / "export" / "README.md")
    spearman = {r.metric_type: r.metric_value for r in card.data.eval_results}["spearmanr"]
    assert spearman == pytest.approx(record["value"], abs=0.01)
    assert "| mean: 51.00 ± 1.00 (n=3) | cls: 21.00 ± 1.00 (n=3) | +30.00 |" in card.text
    assert "profile `tuned-cpu-full`" in card.text and "tuned to on dev at seed 0" in card.text
    metrics_file = tmp_path / TINY.name / "metrics.json"
    written = metrics_file.stat().st_mtime_ns
    caplog.clear()
    assert make_zoo.main(argv) == 0  # resumes: the finished entry is not trained again
    assert "[1/1] tiny-cross-encoder-synthetic: done earlier" in caplog.text
    assert metrics_file.stat().st_mtime_ns == written


@pytest.mark.parametrize(
    "argv, named",
    [
        (["--only", "comateformer-stsb"], "--only: unknown entries ['comateformer-stsb']; known: "),
        (["--profile", "tpu"], "argument --profile: invalid choice: 'tpu'"),
        (["--seed", "x"], "argument --seed: invalid int value: 'x'"),
        (["--no_such_flag"], "--no_such_flag"),
    ],
)
def test_bad_flags_are_one_line_naming_the_flag_and_write_nothing(tmp_path, capsys, argv, named):
    assert make_zoo.main(["--output_dir", str(tmp_path / "zoo"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pairzoo.make_zoo: error: ") and named in err and "\n" not in err, err
    if argv[0] == "--only":
        assert "comateformer-sick-e" in err  # the known entries are named
    assert list(tmp_path.iterdir()) == []
