"""`python -m pairzoo.train` and the data loaders on bad input.

The contract of tests/test_bad_inputs.py: a bad input raises, before anything is written, an exception of the
documented type whose message names the offending flag, field or file; `tmp_path` (every file, its size and mtime) is
the same after the failing call as before it. The command line prints such an error as one line,
`pairzoo.train: error: ...`, and exits with status 2.
"""

import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from test_bad_inputs import STSB_HEADER

from pairzoo import list_models
from pairzoo.modeling import CrossEncoderForConditionalSimilarity
from pairzoo.train import console_main
from pairzoo.training.cli import (
    DEFAULT_OUTPUT_DIR,
    NonFiniteLossError,
    build_parser,
    complete_checkpoints,
    main,
    parse_args,
    resolve_resume_checkpoint,
    trainable_datasets,
    undone_on_failure,
)
from pairzoo.training.data import list_datasets, load_dataset

TINY = ["--backbone", "tiny-bert", "--max_steps", "1", "--per_device_train_batch_size", "4",
        "--synthetic_train_size", "8", "--synthetic_validation_size", "4", "--max_length", "48",
        "--eval_strategy", "no", "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true"]  # fmt: skip
STSB_ROWS = "".join(f"{i}\tg\tf\t2012\t{i}\ts\ts\tA man walks {i}.\tA man runs.\t{i % 5}.0\n" for i in range(6))
SICK_HEADER = (
    "pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\tentailment_AB\tentailment_BA\t"
    "sentence_A_original\tsentence_B_original\tsentence_A_dataset\tsentence_B_dataset\tSemEval_set\n"
)
ABSA_NO_TERMS = '<sentences><sentence id="1"><text>The food was fine.</text></sentence></sentences>'
ABSA_ONLY_CONFLICT = (
    '<sentences><sentence id="1"><text>The food was fine.</text><aspectTerms>'
    '<aspectTerm term="food" polarity="conflict" from="4" to="8"/></aspectTerms></sentence></sentences>'
)


def _sick_row(pair_id: int, semeval_set: str, extra: str = "") -> str:
    fields = [str(pair_id), "A man walks.", "A man runs.", "NEUTRAL", "3.5", "A_neutral_B", "B_neutral_A", "a", "b"]
    return "\t".join([*fields, "x", "y", semeval_set]) + extra + "\n"


def _sts_original(rows: int, extra: str = "") -> str:
    """The original STS Benchmark layout: no header, `genre file year id score s1 s2` (+ 2 optional source fields)."""
    lines = [f"main-news\tMSRpar\t2012test\t{i:04d}\t{i % 6}.000\tA man walks {i}.\tA man runs." for i in range(rows)]
    lines[0] += "\tsource-a\tsource-b"  # some original rows name the sentences' sources
    return "\n".join(lines) + extra + "\n"


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def _write(root: Path, files: dict) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")


@dataclass
class Case:
    """`setup(tmp)` writes what the case needs and returns the bad call, which must raise `error` matching `match`."""

    id: str
    setup: Callable[[Path], Callable[[], object]]
    error: type
    match: str


def _cli(*args: str, files: "dict | None" = None) -> Callable[[Path], Callable[[], object]]:
    """`main` with the tiny arguments and `args`; `files` (path under tmp -> text) are written first, `{tmp}` in an
    argument is the scratch folder."""

    def setup(tmp: Path):
        _write(tmp, files or {})
        argv = ["--output_dir", str(tmp / "run"), *TINY, *(a.replace("{tmp}", str(tmp)) for a in args)]
        return lambda: main(argv)

    return setup


def _data(name: str, files: dict, split: "str | None" = None) -> Callable[[Path], Callable[[], object]]:
    def setup(tmp: Path):
        _write(tmp, files)
        return lambda: load_dataset(name, data_dir=tmp / "data", split=split)

    return setup


STSB_DATA = {"data/STS-B/train.tsv": STSB_HEADER + STSB_ROWS, "data/STS-B/dev.tsv": STSB_HEADER + STSB_ROWS}
WITH_STSB = ("--dataset", "stsb", "--data_dir", "{tmp}/data")

CASES = [
    # ---------------------------------------------------------------- 3: a run that would not train
    Case("no-train-zero-epochs", _cli("--max_steps", "-1", "--num_train_epochs", "0"), ValueError,
         r"`--num_train_epochs` must be > 0"),
    Case("no-train-nan-epochs", _cli("--max_steps", "-1", "--num_train_epochs", "nan"), ValueError,
         r"`--num_train_epochs` must be > 0"),
    Case("no-train-zero-steps", _cli("--max_steps", "0"), ValueError, r"`--max_steps` must be a positive .*would not"),
    Case("no-train-negative-steps", _cli("--max_steps", "-5"), ValueError, r"`--max_steps` must be a positive"),
    Case("no-train-empty-train-file", _cli(*WITH_STSB, files={**STSB_DATA, "data/STS-B/train.tsv": STSB_HEADER}),
         ValueError, r"split 'train' of 'stsb' has no rows in .*train.tsv"),
    # ---------------------------------------------------------------- 4: invalid numbers, checked before any work
    Case("num-negative-learning-rate", _cli("--learning_rate", "-1"), ValueError,
         r"`--learning_rate` must be a number > 0, got -1.0"),
    Case("num-zero-learning-rate", _cli("--learning_rate", "0"), ValueError, r"`--learning_rate` must be a number"),
    Case("num-nan-learning-rate", _cli("--learning_rate", "nan"), ValueError, r"`--learning_rate`.*got nan"),
    Case("num-zero-train-batch", _cli("--per_device_train_batch_size", "0"), ValueError,
         r"`--per_device_train_batch_size` must be an integer >= 1, got 0"),
    Case("num-zero-eval-batch", _cli("--per_device_eval_batch_size", "0"), ValueError,
         r"`--per_device_eval_batch_size` must be an integer >= 1"),
    Case("num-zero-accumulation", _cli("--gradient_accumulation_steps", "0"), ValueError,
         r"`--gradient_accumulation_steps` must be an integer >= 1"),
    Case("num-negative-weight-decay", _cli("--weight_decay", "-0.1"), ValueError, r"`--weight_decay` must be"),
    Case("num-negative-warmup", _cli("--warmup_steps", "-1"), ValueError, r"warmup_steps"),
    Case("num-nan-warmup", _cli("--warmup_steps", "nan"), ValueError, r"`--warmup_steps` must be a number >= 0"),
    Case("num-negative-grad-norm", _cli("--max_grad_norm", "-1"), ValueError, r"`--max_grad_norm` must be a number"),
    Case("num-beta-one", _cli("--adam_beta2", "1"), ValueError, r"`--adam_beta2` must be in \[0, 1\)"),
    Case("num-negative-epsilon", _cli("--adam_epsilon=-1e-8"), ValueError, r"`--adam_epsilon` must be a number"),
    Case("num-label-smoothing-one", _cli("--label_smoothing_factor", "1"), ValueError, r"`--label_smoothing_factor`"),
    Case("num-negative-save-steps", _cli("--save_steps", "-2"), ValueError, r"`--save_steps` must be a number > 0"),
    Case("num-negative-workers", _cli("--dataloader_num_workers", "-1"), ValueError, r"`--dataloader_num_workers`"),
    Case("num-negative-seed", _cli("--seed", "-1"), ValueError, r"`--seed` must be an integer in \[0, 2\*\*32\)"),
    Case("num-zero-max-length", _cli("--max_length", "0"), ValueError, r"`--max_length` must be an integer >= 1"),
    Case("num-zero-max-train-samples", _cli("--max_train_samples", "0"), ValueError, r"`--max_train_samples`"),
    Case("num-zero-max-eval-samples", _cli("--max_eval_samples", "0"), ValueError, r"`--max_eval_samples`"),
    # ---------------------------------------------------------------- 5: a model that cannot read the task
    Case("task-siamese-on-absa", _cli("--model", "siamese-matcher", "--dataset", "absa-restaurants"), ValueError,
         r"--model siamese-matcher cannot train on --dataset absa-restaurants: .*conditional-classification.*"
         r"\(data sets: mrpc, .*stsb\)"),
    Case("task-comateformer-on-conditional", _cli("--model", "comateformer", "--dataset", "synthetic"), ValueError,
         r"--model comateformer cannot train on --dataset synthetic.*Models that can train on 'synthetic': "
         r"cross-encoder, csr, seaver"),
    Case("task-neighbor-attention-regression", _cli("--model", "neighbor-attention", "--dataset", "stsb"), ValueError,
         r"--model neighbor-attention cannot train on --dataset stsb: 'stsb' is pair-regression data"),
    Case("task-csr-on-absa", _cli("--model", "csr", "--dataset", "absa-laptops"), ValueError,
         r"--model csr cannot train on --dataset absa-laptops.*\(data sets: csts, synthetic\)"),
    # ---------------------------------------------------------------- 6: a conditional model given sentence pairs
    Case("pair-seaver-on-sick-e", _cli("--model", "seaver", "--dataset", "sick-e"), ValueError,
         r"--model seaver cannot train on --dataset sick-e.*second sentence as the condition.*use .*cross-encoder"),
    Case("pair-seaver-on-stsb", _cli("--model", "seaver", "--dataset", "stsb"), ValueError,
         r"--model seaver cannot train on --dataset stsb: 'stsb' is pair-regression"),
    Case("pair-csr-on-sick-r", _cli("--model", "csr", "--dataset", "sick-r"), ValueError,
         r"--model csr cannot train on --dataset sick-r: .*Sentence pairs have no condition"),
    Case("no-push-to-hub", _cli("--push_to_hub", "true"), ValueError,
         r"`--push_to_hub` would upload the Trainer's output_dir.*python -m pairzoo.hub_cards push OUTPUT_DIR/export"),
    # ---------------------------------------------------------------- 9: too few validation rows for the metrics
    Case("eval-synthetic-validation-one", _cli("--synthetic_validation_size", "1"), ValueError,
         r"`--synthetic_validation_size` must be an integer >= 2, got 1"),
    Case("eval-regression-one-row", _cli(*WITH_STSB, "--max_eval_samples", "1", files=STSB_DATA), ValueError,
         r"'stsb' gives 1 validation row\(s\) \(--max_eval_samples\): Spearman and Pearson need at least 2"),
    # ---------------------------------------------------------------- 14: data files
    Case("data-absa-no-aspect-terms",
         _data("absa-laptops", {"data/SemEval2014_ABSA/Laptop_Train_v2.xml": ABSA_NO_TERMS}),
         ValueError, r"Laptop_Train_v2.xml' has no aspect terms"),
    Case("data-absa-only-conflict",
         _data("absa-restaurants", {"data/SemEval2014_ABSA/Restaurants_Train_v2.xml": ABSA_ONLY_CONFLICT}),
         ValueError, r"Restaurants_Train_v2.xml' has no aspect terms"),
    Case("data-sick-misspelt-set",
         _data("sick-r", {"data/SICK/SICK.txt": SICK_HEADER + _sick_row(1, "TRAIN") + _sick_row(2, "TRIAl")}),
         ValueError, r"SICK.txt' line 3: `SemEval_set` 'TRIAl' is not one of \['TRAIN', 'TRIAL', 'TEST'\]"),
    Case("data-sick-extra-field",
         _data("sick-e", {"data/SICK/SICK.txt": SICK_HEADER + _sick_row(1, "TRAIN", "\tsurplus")}),
         ValueError, r"SICK.txt' line 2: expected at most 12 tab-separated fields, got 13"),
    Case("data-stsb-extra-trailing-field",
         _data("stsb", {"data/STS-B/dev.tsv": STSB_HEADER + STSB_ROWS + "9\tg\tf\t2012\t9\ts\ts\tA.\tB.\t3.0\t1.0\n"},
               "validation"),
         ValueError, r"dev.tsv' line 8: expected 10 tab-separated fields \(the header's\), got 11"),
    Case("data-mrpc-extra-field",
         _data("mrpc", {"data/MRPC/dev.tsv": "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tA.\tB.\tC.\n"},
               "validation"),
         ValueError, r"MRPC/dev.tsv' line 2: expected 5 tab-separated fields \(the header's\), got 6"),
    Case("data-quora-extra-field",
         _data("quora", {"data/Quora_BiMPM_partition/re2_format/dev.txt": "A.\tB.\t1\nA.\tB.\t0\textra\n"}),
         ValueError, r"dev.txt' line 2: expected at most 3 tab-separated fields, got 4"),
    Case("data-sts-test-missing", _data("stsb", STSB_DATA, "test"), FileNotFoundError,
         r"split 'test' of 'stsb' needs .*STS-B/original/sts-test.tsv', which is missing"),
    Case("data-sts-test-short-row",
         _data("stsb", {"data/STS-B/original/sts-test.tsv": _sts_original(3, "\nmain-news\tMSRpar\t2012\t1\t3.0\tA.")},
               "test"),
         ValueError, r"sts-test.tsv' line 4: expected at least 7 tab-separated fields, got 6"),
    Case("data-sts-test-extra-fields",
         _data("stsb", {"data/STS-B/original/sts-test.tsv": _sts_original(3, "\tsource-c\tsource-d\tsource-e")},
               "test"),
         ValueError, r"sts-test.tsv' line 3: expected at most 9 tab-separated fields, got 10"),
    Case("data-sts-test-label-outside",
         _data("stsb", {"data/STS-B/original/sts-test.tsv": "g\tf\t2012\t1\t5.5\tA.\tB.\n"}, "test"),
         ValueError, r"sts-test.tsv' row 1: label 5.5 is outside \[0.0, 5.0\]"),
    Case("data-absa-too-few-to-split",
         _data("absa-laptops", {"data/SemEval2014_ABSA/Laptop_Train_v2.xml": ABSA_ONLY_CONFLICT.replace(
             "conflict", "positive")}),
         ValueError, r"Laptop_Train_v2.xml' has 1 row\(s\): too few to split"),
]  # fmt: skip


def test_the_table_covers_every_item_and_ids_are_unique():
    assert len({case.id for case in CASES}) == len(CASES)
    prefixes = {case.id.split("-")[0] for case in CASES}
    assert {"no", "num", "task", "pair", "eval", "data"} <= prefixes


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_raises_naming_the_culprit_and_writes_nothing(case, tmp_path):
    bad_call = case.setup(tmp_path)
    before = _snapshot(tmp_path)
    with pytest.raises(case.error, match=case.match):
        bad_call()
    assert _snapshot(tmp_path) == before, "a failing call must leave the disk as it found it"


# --------------------------------------------------------------------------- 6: pair data still trains where it fits


def test_the_cross_encoder_still_trains_on_sentence_pairs(tmp_path):
    _write(tmp_path, STSB_DATA)
    result = main(["--output_dir", str(tmp_path / "run"), *TINY, "--dataset", "stsb", "--data_dir",
                   str(tmp_path / "data"), "--export", "false"])  # fmt: skip
    assert result["train_steps"] == 1 and result["validation_rows"] == 6
    assert {"validation_spearman", "validation_pearson"} <= set(result["metrics"])


def test_every_listed_pairing_is_one_the_model_accepts():
    """What `--help` lists is what the check accepts: no model/data set pairing both listed and refused."""
    for model in list_models():
        for dataset in trainable_datasets(model):
            assert dataset in list_datasets()
    assert "sick-e" not in trainable_datasets("seaver") and "stsb" in trainable_datasets("cross-encoder")
    assert "snli" not in trainable_datasets("cross-encoder"), "snli has no training split"


# --------------------------------------------------------------------------- 7 and 8: checkpoints


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    """A tiny cross-encoder run with checkpoint-1 and checkpoint-2 (both complete)."""
    out = tmp_path_factory.mktemp("checkpoints") / "run"
    main(["--output_dir", str(out), *TINY, "--max_steps", "2", "--save_strategy", "steps", "--save_steps", "1",
          "--export", "false"])  # fmt: skip
    assert [p.name for p in complete_checkpoints(out)] == ["checkpoint-1", "checkpoint-2"]
    return out


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


RESUME = ("--max_steps", "3", "--resume_from_checkpoint")
CHECKPOINT_CASES = [
    # 7: another model's checkpoints
    ("other-model-next-to-checkpoints", ("--model", "csr"), None, ValueError,
     r"--output_dir .* holds checkpoint .*checkpoint-1' of another model .*model 'cross-encoder' in the checkpoint, "
     r"'csr' in this run"),
    ("other-model-resume-last", ("--model", "csr", *RESUME, "last"), None, ValueError,
     r"--resume_from_checkpoint: checkpoint .*checkpoint-2' was written by another model .*'cross-encoder'"),
    ("other-backbone-resume", ("--backbone", "tiny-roberta", *RESUME, "last"), None, ValueError,
     r"checkpoint-2' was written by another model or configuration: `backbone_config.model_type` 'bert' in the "
     r"checkpoint, 'roberta' in this run"),
    ("other-hyperparameter-resume", ("--config_overrides", '{"pooling": "mean"}', *RESUME, "last"), None, ValueError,
     r"checkpoint-2' was written by .*`pooling` 'cls' in the checkpoint, 'mean' in this run"),
    ("other-labels-next-to-checkpoints", ("--config_overrides", '{"label_max": 4.0}'), None, ValueError,
     r"holds checkpoint .*`label_max` 5.0 in the checkpoint, 4.0 in this run"),
    # 8: damaged or incomplete checkpoints
    ("truncated-weights", (*RESUME, "last"), lambda run: _truncate(run / "checkpoint-2" / "model.safetensors"),
     ValueError, r"checkpoint file .*checkpoint-2/model.safetensors' is corrupt or truncated"),
    ("trainer-state-not-json", (*RESUME, "last"),
     lambda run: (run / "checkpoint-2" / "trainer_state.json").write_text("{not json"),
     ValueError, r"checkpoint file .*checkpoint-2/trainer_state.json' is not a valid trainer state"),
    ("trainer-state-a-list", (*RESUME, "last"),
     lambda run: (run / "checkpoint-2" / "trainer_state.json").write_text("[1, 2]"),
     ValueError, r"checkpoint-2/trainer_state.json' is not a valid trainer state"),
    ("truncated-optimizer", (*RESUME, "last"), lambda run: _truncate(run / "checkpoint-2" / "optimizer.pt"),
     ValueError, r"checkpoint-2/optimizer.pt' is corrupt or truncated"),
    ("named-checkpoint-without-optimizer", (*RESUME, "{run}/checkpoint-2"),
     lambda run: (run / "checkpoint-2" / "optimizer.pt").unlink(),
     ValueError, r"checkpoint-2' is not a complete checkpoint: it has no optimizer.pt"),
    ("named-checkpoint-without-scheduler", (*RESUME, "{run}/checkpoint-1"),
     lambda run: (run / "checkpoint-1" / "scheduler.pt").unlink(),
     ValueError, r"checkpoint-1' is not a complete checkpoint: it has no scheduler.pt"),
    ("checkpoint-config-not-json", (*RESUME, "last"),
     lambda run: (run / "checkpoint-2" / "config.json").write_text("{"),
     ValueError, r"checkpoint file .*checkpoint-2/config.json' is not valid JSON"),
]  # fmt: skip


@pytest.mark.parametrize(
    "args, damage, error, match", [c[1:] for c in CHECKPOINT_CASES], ids=[c[0] for c in CHECKPOINT_CASES]
)
def test_bad_checkpoint_is_refused_before_training_and_writes_nothing(
    trained_run, tmp_path, args, damage, error, match
):
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    if damage is not None:
        damage(run)
    before = _snapshot(tmp_path)
    argv = ["--output_dir", str(run), *TINY, *(a.replace("{run}", str(run)) for a in args)]
    with pytest.raises(error, match=match):
        main(argv)
    assert _snapshot(tmp_path) == before


def test_last_skips_a_checkpoint_without_optimizer_state(trained_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    (run / "checkpoint-2" / "optimizer.pt").unlink()
    assert [p.name for p in complete_checkpoints(run)] == ["checkpoint-1"]
    assert resolve_resume_checkpoint("last", run) == str(run / "checkpoint-1")


def test_last_is_the_newest_complete_folder_named_as_the_trainer_names_checkpoints(trained_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    for name in ("checkpoint-²", "checkpoint-9-copy", "checkpoint-10x"):  # not `checkpoint-<step>` folders
        shutil.copytree(run / "checkpoint-2", run / name)
    (run / "checkpoint-9").write_text("a file, not a folder")
    assert [p.name for p in complete_checkpoints(run)] == ["checkpoint-1", "checkpoint-2"]
    assert resolve_resume_checkpoint("last", run) == str(run / "checkpoint-2")


def test_a_matching_checkpoint_resumes(trained_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    result = main(["--output_dir", str(run), *TINY, *RESUME, "last", "--export", "false"])
    assert result["train_steps"] == 3


# --------------------------------------------------------------------------- a failure after the checks


def _failing_forward(monkeypatch) -> None:
    """Every training forward returns a NaN loss: training stops at step 1 with a NonFiniteLossError."""
    real_forward = CrossEncoderForConditionalSimilarity.forward

    def forward(self, *args, **kwargs):
        out = real_forward(self, *args, **kwargs)
        if self.training and out.loss is not None:
            out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(CrossEncoderForConditionalSimilarity, "forward", forward)


def test_a_run_that_fails_removes_the_folders_it_created(monkeypatch, tmp_path):
    _failing_forward(monkeypatch)
    with pytest.raises(NonFiniteLossError, match="step 1"):
        main(["--output_dir", str(tmp_path / "new" / "nested" / "run"), *TINY, "--save_strategy", "steps",
              "--save_steps", "1"])  # fmt: skip
    assert list(tmp_path.iterdir()) == []


def test_a_run_that_fails_keeps_what_was_there(monkeypatch, tmp_path):
    _write(tmp_path, {"run/notes.txt": "mine", "run/old/result.json": "{}"})
    before = _snapshot(tmp_path)
    _failing_forward(monkeypatch)
    with pytest.raises(NonFiniteLossError):
        main(["--output_dir", str(tmp_path / "run"), *TINY])
    assert _snapshot(tmp_path) == before


def test_clean_up_removes_only_new_entries_and_keeps_a_new_complete_checkpoint(trained_run, tmp_path):
    run = tmp_path / "run"
    _write(tmp_path, {"run/notes.txt": "mine"})
    notes = (run / "notes.txt").stat()
    with pytest.raises(RuntimeError), undone_on_failure(run, enabled=True):
        _write(tmp_path, {"run/checkpoint-5/model.safetensors": "half", "run/runs/events": "log"})
        raise RuntimeError("failed after writing")
    assert [p.name for p in run.iterdir()] == ["notes.txt"]
    assert (run / "notes.txt").stat().st_mtime_ns == notes.st_mtime_ns
    with pytest.raises(RuntimeError), undone_on_failure(run, enabled=True):
        shutil.copytree(trained_run / "checkpoint-1", run / "checkpoint-1")
        _write(tmp_path, {"run/runs/events": "log"})
        raise RuntimeError("failed after a checkpoint")
    assert {p.name for p in run.iterdir()} == {"notes.txt", "checkpoint-1", "runs"}, "kept to resume from"


# --------------------------------------------------------------------------- 10: the command line's one-line errors


def test_command_line_prints_one_line_and_exits_2(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "pairzoo.train", "--output_dir", str(out), *TINY, "--learning_rate", "-1"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("pairzoo.train: error:")]
    assert errors == ["pairzoo.train: error: `--learning_rate` must be a number > 0, got -1.0."], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--per_device_train_batch_size", "0"], "`--per_device_train_batch_size` must be an integer >= 1"),
        (["--model", "seaver", "--dataset", "sick-e"], "--model seaver cannot train on --dataset sick-e"),
        (["--resume_from_checkpoint", "/nonexistent/checkpoint-9"], "/nonexistent/checkpoint-9"),
        (["--no_such_flag", "1"], "--no_such_flag"),
    ],
)
def test_console_main_turns_input_errors_into_one_line(tmp_path, capsys, args, message):
    assert console_main(["--output_dir", str(tmp_path / "run"), *TINY, *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("pairzoo.train: error: ") and message in err[-1]
    assert "Traceback" not in "\n".join(err)
    assert list(tmp_path.iterdir()) == []


def test_traceback_flag_shows_the_exception(tmp_path):
    with pytest.raises(ValueError, match="`--learning_rate`"):
        console_main(["--output_dir", str(tmp_path / "run"), *TINY, "--learning_rate", "-1", "--traceback"])


def test_diverged_training_is_one_line_with_status_1(monkeypatch, tmp_path, capsys):
    _failing_forward(monkeypatch)
    assert console_main(["--output_dir", str(tmp_path / "run"), *TINY]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("pairzoo.train: error: training loss is nan")


# --------------------------------------------------------------------------- 11: --help tells the truth


def test_help_names_the_program_models_data_sets_and_true_defaults():
    text = build_parser().format_help()
    assert text.startswith("usage: python -m pairzoo.train ")
    assert "Fine-tune a pairzoo model" in text
    assert f"(default: {DEFAULT_OUTPUT_DIR})" in text
    no_export = text[text.index("  --no_export") :].split("  --output_dir")[0]
    assert "--no_export: only checkpoints and metrics.json" in " ".join(no_export.split())
    for name in [*list_models(), *list_datasets()]:
        assert f" {name}" in text, name


def test_output_dir_default_is_the_documented_one():
    _, _, training_args, _ = parse_args(["--model", "cross-encoder"])
    assert training_args.output_dir == DEFAULT_OUTPUT_DIR


# --------------------------------------------------------------------------- 14: the STS-B test split reads


def test_stsb_test_split_reads_the_original_headerless_file(tmp_path):
    _write(tmp_path, {"data/STS-B/original/sts-test.tsv": _sts_original(4)})
    test = load_dataset("stsb", data_dir=tmp_path / "data", split="test")["test"]
    assert len(test) == 4
    assert test["sentence1"] == [f"A man walks {i}." for i in range(4)]
    assert torch.allclose(torch.tensor(test["label"]), torch.tensor([0.0, 1.0, 2.0, 3.0]))
