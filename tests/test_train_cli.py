"""`python -m pairzoo.train`: end to end on a tiny model, classification data, bad arguments, training stats."""

import json
import os
import subprocess
import sys

import pytest
import torch

from pairzoo.training.cli import main

TINY = ["--backbone", "tiny-bert", "--num_train_epochs", "1", "--per_device_train_batch_size", "8",
        "--eval_strategy", "no", "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true"]  # fmt: skip


def test_cli_trains_evaluates_and_exports(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "pairzoo.train", "--model", "cross-encoder", "--dataset", "synthetic",
         "--synthetic_train_size", "48", "--synthetic_validation_size", "24", "--output_dir", str(out), *TINY],
        capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["model"] == "cross-encoder" and metrics["train_rows"] == 48 and metrics["validation_rows"] == 24
    assert {"validation_spearman", "validation_pearson", "validation_mse"} <= set(metrics["metrics"])
    assert 0 < metrics["metrics"]["train_loss"] < 10  # the run's mean training loss beside the dev metrics
    assert '"validation_spearman"' in proc.stdout
    assert (out / "export" / "model.safetensors").is_file() and (out / "export" / "README.md").is_file()


def test_classification_dataset_gets_labels_from_the_data(tmp_path, data_dir):
    result = main(
        ["--model", "cross-encoder", "--dataset", "sick-e", "--data_dir", str(data_dir), "--max_train_samples", "16",
         "--max_eval_samples", "16", "--max_length", "48", "--output_dir", str(tmp_path / "cls"), "--export", "false",
         *TINY]
    )  # fmt: skip
    assert {"validation_accuracy", "validation_f1"} <= set(result["metrics"])
    saved = json.loads((tmp_path / "cls" / "metrics.json").read_text())
    assert saved["validation_rows"] == 16


@pytest.mark.parametrize(
    "args, error, message",
    [
        (["--model", "nope"], ValueError, "Unknown model 'nope'"),
        (["--dataset", "imdb"], ValueError, "Unknown dataset 'imdb'"),
        (["--dataset", "mrpc", "--data_dir", "/nonexistent/data"], FileNotFoundError, "/nonexistent/data"),
        (["--dataset", "wn18rr"], ValueError, "knowledge graph"),
        (["--config_overrides", '{"pooling": "max"}'], ValueError, "pooling"),
        (["--config_overrides", "[1, 2]"], ValueError, "JSON object"),
    ],
)
def test_bad_arguments_fail_clearly_and_write_nothing(tmp_path, args, error, message):
    out = tmp_path / "never"
    with pytest.raises(error, match=message):
        main(["--output_dir", str(out), *TINY, *args])
    assert not out.exists()


@pytest.mark.parametrize(
    "num_labels, label, message",
    [
        (1, float("nan"), "not finite"),
        (1, 7.0, "outside"),
        (1, "3", "must be a number"),
        (3, 3, "not a class index"),
        (3, 1.5, "not a class index"),
    ],
)
def test_collator_rejects_bad_labels(num_labels, label, message):
    from pairzoo import load_tokenizer
    from pairzoo.training.collators import ConditionalPairCollator

    collator = ConditionalPairCollator(
        load_tokenizer("tiny-bert"), 32, num_labels, (1.0, 5.0) if num_labels == 1 else None
    )
    row = {"sentence1": "A man walks.", "sentence2": "A man runs.", "condition": "The activity.", "label": label}
    with pytest.raises(ValueError, match=message):
        collator([row])


def test_pair_task_run_names_its_positive_class_and_exports_the_pair_pipeline(tmp_path, data_dir):
    result = main(
        ["--model", "cross-encoder", "--dataset", "rte", "--data_dir", str(data_dir), "--max_train_samples", "16",
         "--max_eval_samples", "16", "--max_length", "48", "--output_dir", str(tmp_path / "rte"), *TINY]
    )  # fmt: skip
    assert result["f1_positive_class"] == "entailment"  # RTE's class 0: the binary F1 is not silently class 1's
    card = (tmp_path / "rte" / "export" / "README.md").read_text()
    assert 'pipeline("pair-similarity"' in card and 'pipeline("conditional-similarity"' not in card


def test_evaluation_runs_longest_rows_first_and_scores_each_row_against_its_own_label(tmp_path):
    """`pairzoo.train`'s Trainer evaluates in length-sorted order; its metrics equal those of scoring the
    rows in their own order, so predictions stay aligned with their labels."""
    import torch
    from datasets import Dataset
    from transformers import TrainingArguments

    from pairzoo import create_model, load_tokenizer
    from pairzoo.training.cli import GuardedTrainer
    from pairzoo.training.collators import make_collator
    from pairzoo.training.metrics import compute_metrics_fn, regression_metrics

    words = "a man plays the red guitar while two women sing on a busy street".split()
    rows = [
        {"sentence1": " ".join(words[: 2 + (i * 5) % 11]), "sentence2": " ".join(words[i % 4 :]), "label": 1.0 + i % 5}
        for i in range(12)
    ]
    dataset = Dataset.from_list(rows)
    model = create_model("cross-encoder", backbone="tiny-bert", label_min=1.0, label_max=5.0).eval()
    tokenizer = load_tokenizer("tiny-bert")
    collator = make_collator(model, tokenizer, 64, (1.0, 5.0))
    args = TrainingArguments(
        str(tmp_path), per_device_eval_batch_size=4, report_to="none", remove_unused_columns=False
    )
    args.label_names = ["labels"]
    trainer = GuardedTrainer(
        model=model, args=args, eval_dataset=dataset, data_collator=collator, compute_metrics=compute_metrics_fn(1)
    )
    order = list(trainer._get_eval_sampler(dataset))
    lengths = [len(r["sentence1"]) + len(r["sentence2"]) for r in rows]
    assert sorted(order) == list(range(12)) and [lengths[i] for i in order] == sorted(lengths, reverse=True)
    assert order != list(range(12))
    metrics = trainer.evaluate()
    with torch.no_grad():
        scores = torch.cat([model(**collator(rows[i : i + 4])).scores for i in range(0, 12, 4)])
    expected = regression_metrics(scores.numpy(), [r["label"] for r in rows])
    assert metrics["eval_spearman"] == pytest.approx(expected["spearman"], abs=1e-4)


def test_run_reports_the_trained_gates_in_its_logs_and_metrics(tmp_path, data_dir, monkeypatch):
    """A gated DRCN + SFA run short of a logging step: the Trainer's end-of-training log carries the model's
    `training_stats()`, the evaluation log does not, and the run's metrics (metrics.json too) hold the trained gates as
    `train_stats/...` beside the dev metrics."""
    from pairzoo.training import cli

    trainers = []

    class RecordingTrainer(cli.GuardedTrainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            trainers.append(self)

    monkeypatch.setattr(cli, "GuardedTrainer", RecordingTrainer)
    overrides = {
        "matcher": "drcn",
        "hidden_size": 32,
        "max_sequence_length": 32,
        "drcn_layers": 5,
        "sfa_reductions": [2, 2],
        "feature_attention": "sfa",
        "feature_attention_residual": "gated",
    }
    result = main(
        ["--model", "siamese-matcher", "--dataset", "sick-e", "--data_dir", str(data_dir), "--max_train_samples", "16",
         "--max_eval_samples", "8", "--max_length", "32", "--config_overrides", json.dumps(overrides),
         "--learning_rate", "1e-2", "--output_dir", str(tmp_path / "run"), "--export", "false", *TINY]
    )  # fmt: skip
    (trainer,) = trainers
    gates = trainer.model.training_stats()
    assert set(gates) == {f"siamese/feature_attention/{layer}/gate_{i}" for layer in (2, 4) for i in (0, 1)}
    assert all(value != 0 for value in gates.values()), "the gates moved off zero"
    expected = {f"train_stats/{name}": value for name, value in gates.items()}
    assert expected.items() <= result["metrics"].items() and "validation_accuracy" in result["metrics"]
    assert not any(name.startswith("siamese/") for name in result["metrics"])
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())["metrics"]
    assert expected.items() <= saved.items()
    end_of_training, evaluation = trainer.state.log_history
    assert "train_runtime" in end_of_training and gates.items() <= end_of_training.items()
    assert "validation_accuracy" in evaluation and not any(name.startswith("siamese/") for name in evaluation)


class _Reporting(torch.nn.Module):
    def __init__(self, stats: dict) -> None:
        super().__init__()
        self.stats = stats

    def training_stats(self) -> dict:
        return dict(self.stats)


def test_stats_callback_adds_stats_to_training_logs_only():
    """Nothing for a model without `training_stats` or with none to report, nor for an evaluation's log; otherwise
    the stats join the log and its `log_history` entry, and `latest` keeps the last ones."""
    from transformers import TrainerControl
    from transformers.trainer_callback import TrainerState

    from pairzoo.training.cli import TrainingStatsCallback

    callback, state, control = TrainingStatsCallback(), TrainerState(), TrainerControl()

    def log(model, logs: dict) -> dict:
        state.log_history.append({**logs, "step": len(state.log_history)})
        callback.on_log(None, state, control, logs=logs, model=model)
        return logs

    for model in (torch.nn.Linear(2, 1), _Reporting({})):
        assert log(model, {"loss": 1.0}) == {"loss": 1.0} and state.log_history[-1] == {"loss": 1.0, "step": 0}
        state.log_history.clear()
    assert callback.latest == {}
    model = _Reporting({"family/gate": 0.5})
    assert log(model, {"loss": 1.0}) == {"loss": 1.0, "family/gate": 0.5}
    assert state.log_history[-1] == {"loss": 1.0, "step": 0, "family/gate": 0.5}
    callback.on_prediction_step(None, state, control)
    model.stats = {"family/gate": 0.75}
    assert log(model, {"eval_loss": 2.0}) == {"eval_loss": 2.0} and "family/gate" not in state.log_history[-1]
    callback.on_evaluate(None, state, control)
    assert callback.latest == {"family/gate": 0.5}
    assert log(model, {"loss": 0.5})["family/gate"] == 0.75 and callback.latest == {"family/gate": 0.75}
