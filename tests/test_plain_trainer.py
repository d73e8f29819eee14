"""A pairzoo model under a plain `transformers.Trainer` (`tokenize_dataset`, `make_collator`, `compute_metrics_fn` from
`pairzoo.training`), the example script, the console scripts, and runs free of the special-token and pin-memory
warnings."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from datasets import ClassLabel, Dataset
from transformers import Trainer, TrainingArguments, trainer_utils

from pairzoo import create_model, load_tokenizer
from pairzoo.training import align_special_tokens, compute_metrics_fn, make_collator, tokenize_dataset

REPO = Path(__file__).resolve().parents[1]
WORDS = "a man plays the red guitar while two women sing on a busy street near the old station".split()


def _texts(n: int, label, condition: bool = False) -> Dataset:
    rows = {
        "sentence1": [" ".join(WORDS[i % 5 : i % 5 + 3 + i % 4]) for i in range(n)],
        "sentence2": [" ".join(WORDS[(i + 4) % 7 : (i + 4) % 7 + 2 + i % 3]) for i in range(n)],
        "label": [label(i) for i in range(n)],
    }
    if condition:
        rows["condition"] = [["the colour", "the place"][i % 2] for i in range(n)]
    return Dataset.from_dict(rows)


def _args(tmp_path, **kwargs) -> TrainingArguments:
    return TrainingArguments(str(tmp_path), max_steps=2, per_device_train_batch_size=4, report_to="none", **kwargs)


@pytest.fixture
def transformers_warnings(monkeypatch) -> list:
    """Messages `transformers.trainer_utils` warns (where the Trainer aligns special tokens)."""
    seen = []
    monkeypatch.setattr(trainer_utils.logger, "warning", lambda message, *args, **kwargs: seen.append(message))
    return seen


def test_plain_trainer_trains_tokenized_texts_with_default_arguments(tmp_path, transformers_warnings):
    model = create_model("cross-encoder", backbone="tiny-bert", label_min=0.0, label_max=5.0)
    tokenizer = load_tokenizer("tiny-bert")
    data = tokenize_dataset(_texts(12, lambda i: float(i % 6), condition=True), model, tokenizer, max_length=48)
    assert data.column_names == ["input_ids", "attention_mask", "labels"]  # the forward's inputs, no texts
    args = _args(tmp_path)
    assert args.remove_unused_columns is True
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=data,
        eval_dataset=data,
        data_collator=make_collator(model, tokenizer, 48),
        processing_class=tokenizer,
        compute_metrics=compute_metrics_fn(model.config.num_labels),
    )
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    trainer.train()
    metrics = trainer.evaluate()
    assert trainer.state.global_step == 2
    assert {"eval_spearman", "eval_pearson", "eval_mse"} <= set(metrics)
    assert any(not torch.equal(before[name], p) for name, p in model.named_parameters())
    assert not [m for m in transformers_warnings if "PAD/BOS/EOS" in m]  # `tokenize_dataset` aligned the config
    assert model.config.pad_token_id == tokenizer.pad_token_id


def test_plain_trainer_classifies_with_class_labels(tmp_path):
    model = create_model("siamese-matcher", backbone="tiny-bert", num_labels=3)
    tokenizer = load_tokenizer("tiny-bert")
    texts = _texts(9, lambda i: i % 3).cast_column("label", ClassLabel(names=["a", "b", "c"]))
    data = tokenize_dataset(texts, model, tokenizer, max_length=32)
    trainer = Trainer(
        model=model,
        args=_args(tmp_path),
        train_dataset=data,
        eval_dataset=data,
        data_collator=make_collator(model, tokenizer, 32),
        compute_metrics=compute_metrics_fn(3, ["a", "b", "c"]),
    )
    trainer.train()
    assert {"eval_accuracy", "eval_f1"} <= set(trainer.evaluate())


@pytest.mark.parametrize(
    "name, overrides, condition",
    [
        ("cross-encoder", {}, True),
        ("comateformer", {}, False),
        ("csr", {}, True),
        ("csr", {"architecture": "bi"}, True),
        ("neighbor-attention", {}, False),
        ("siamese-matcher", {}, False),
    ],
)
def test_tokenized_rows_collate_to_the_batches_of_their_texts(name, overrides, condition):
    model = create_model(name, backbone="tiny-bert", **overrides)
    tokenizer = load_tokenizer("tiny-bert")
    regression = model.config.num_labels == 1
    texts = _texts(6, (lambda i: 1.0 + i % 4) if regression else (lambda i: i % 2), condition)
    if regression:
        model.config.label_min, model.config.label_max = 1.0, 5.0
    collator = make_collator(model, tokenizer, 24, (1.0, 5.0) if regression else None)
    tokenized = tokenize_dataset(texts, model, tokenizer, max_length=24)
    from_texts = collator([texts[i] for i in range(len(texts))])
    from_tokens = collator([tokenized[i] for i in range(len(tokenized))])
    assert from_texts.keys() == from_tokens.keys()
    for key in from_texts:
        assert torch.equal(from_texts[key], from_tokens[key]), key


def test_text_columns_under_default_arguments_get_a_clear_error(tmp_path):
    model = create_model("cross-encoder", backbone="tiny-bert", label_min=0.0, label_max=5.0)
    tokenizer = load_tokenizer("tiny-bert")
    trainer = Trainer(
        model=model,
        args=_args(tmp_path),
        train_dataset=_texts(8, lambda i: float(i % 6)),
        data_collator=make_collator(model, tokenizer, 48),
    )
    with pytest.raises(KeyError, match=r"sentence1: .*first .*tokenize_dataset.*remove_unused_columns=False"):
        trainer.train()


@pytest.mark.parametrize(
    "texts, message",
    [
        (Dataset.from_dict({"text": ["a b"], "label": [1.0]}), "dataset 'dataset' has no `sentence1` column"),
        (
            Dataset.from_dict({"sentence1": ["a b", "c d"], "sentence2": ["e", "f"], "label": [1.0, 7.0]}),
            r"dataset 'dataset': `label`\[1\] = 7.0 is outside \[0.0, 5.0\]",
        ),
        (
            Dataset.from_dict({"sentence1": ["a b", " "], "sentence2": ["e", "f"], "label": [1.0, 2.0]}),
            r"dataset 'dataset': `sentence1`\[1\]",
        ),
    ],
)
def test_tokenize_dataset_names_the_bad_row(texts, message):
    model = create_model("cross-encoder", backbone="tiny-bert", label_min=0.0, label_max=5.0)
    with pytest.raises(ValueError, match=message):
        tokenize_dataset(texts, model, load_tokenizer("tiny-bert"), max_length=32)


def test_align_special_tokens_leaves_the_trainer_nothing_to_align(transformers_warnings):
    for backbone in ("tiny-bert", "tiny-roberta"):
        model, tokenizer = create_model("cross-encoder", backbone=backbone), load_tokenizer(backbone)
        align_special_tokens(model, tokenizer)
        trainer_utils.align_special_tokens(model, tokenizer)
        ids = (model.config.pad_token_id, getattr(model.config, "bos_token_id", None))
        assert ids == (tokenizer.pad_token_id, tokenizer.bos_token_id)
    assert transformers_warnings == []


# --------------------------------------------------------------------------------------------- scripts


def _env() -> dict:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def test_example_trains_with_a_plain_trainer_and_exports(tmp_path):
    out = tmp_path / "example"
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / "train_with_trainer.py"), "--backbone", "tiny-bert",
         "--output_dir", str(out)],
        capture_output=True, text=True, cwd=tmp_path, env=_env(), timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "eval_spearman" in proc.stdout and f"export: {out / 'export'}" in proc.stdout
    assert (out / "export" / "model.safetensors").is_file() and (out / "export" / "README.md").is_file()
    assert 'pipeline("pair-similarity"' in (out / "export" / "README.md").read_text()


@pytest.mark.parametrize("script", ["pairzoo-train", "pairzoo-train-kg", "pairzoo-zoo", "pairzoo-card"])
def test_console_scripts_are_installed_and_answer_help(script):
    path = Path(sys.executable).parent / script
    proc = subprocess.run([str(path), "--help"], capture_output=True, text=True, env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage: ")


def test_console_script_error_is_one_line_with_status_2():
    path = Path(sys.executable).parent / "pairzoo-train"
    proc = subprocess.run([str(path), "--dataset", "imdb"], capture_output=True, text=True, env=_env(), timeout=300)
    assert proc.returncode == 2 and proc.stderr.startswith("pairzoo.train: error: Unknown dataset 'imdb'")


def test_a_cli_run_logs_no_special_token_or_pin_memory_warning(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "pairzoo.train", "--model", "cross-encoder", "--backbone", "tiny-bert",
         "--dataset", "synthetic", "--synthetic_train_size", "8", "--synthetic_validation_size", "4",
         "--max_steps", "1", "--per_device_train_batch_size", "4", "--max_length", "32", "--report_to", "none",
         "--output_dir", str(tmp_path / "run")],
        capture_output=True, text=True, cwd=REPO, env=_env(), timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "run" / "metrics.json").is_file()
    assert "PAD/BOS/EOS" not in proc.stderr and "pin_memory" not in proc.stderr, proc.stderr[-3000:]


def test_tokenize_dataset_names_its_own_max_length_argument_not_the_cli_flag():
    texts = Dataset.from_dict({"sentence1": ["a b"], "sentence2": ["e f"], "condition": ["g h"], "label": [1.0]})
    model = create_model("cross-encoder", backbone="tiny-bert")
    with pytest.raises(ValueError, match=r"^`max_length` 4 is too small for CrossEncoderForConditionalSimilarity"):
        tokenize_dataset(texts, model, load_tokenizer("tiny-bert"), max_length=4)
