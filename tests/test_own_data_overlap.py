"""Own data files whose validation or test rows repeat training rows (`--train_file`, `--validation_file`,
`--test_file`): the data summary counts them in one warning line (or says the file is the training file itself) and
training goes on; files without shared rows get no such line."""

import logging

from pairzoo.training.cli import main
from pairzoo.training.data import load_data_files

TINY = ["--backbone", "tiny-bert", "--max_steps", "1", "--per_device_train_batch_size", "4", "--max_length", "32",
        "--eval_strategy", "no", "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true"]  # fmt: skip
CSTS_HEADER = "sentence1,sentence2,condition,label\n"
TRAIN = [
    ("a man plays a guitar", "a woman sings a song", "the activity", "2.0"),
    ("two dogs run in a park", "a cat sleeps on a sofa", "the animal", "1.5"),
    ("a boy reads a book", "a girl writes a letter", "the object", "3.0"),
    ("a chef cooks pasta", "a waiter carries soup", "the food", "4.0"),
]


def _csv(path, rows: "list[tuple]", header: str = CSTS_HEADER) -> str:
    path.write_text(header + "".join(",".join(row) + "\n" for row in rows))
    return str(path)


def _overlap_lines(summary: str) -> "list[str]":
    return [line for line in summary.splitlines() if line.startswith("warning:")]


def test_dev_rows_with_a_training_rows_texts_and_condition_are_counted_whatever_their_label(tmp_path):
    dev = [
        ("a man plays a guitar", "a woman sings a song", "the activity", "3.5"),  # the texts of train row 1
        ("a chef cooks pasta", "a waiter carries soup", "the food", "4.0"),  # train row 4, label and all
        ("two dogs run in a park", "a cat sleeps on a sofa", "the place", "1.5"),  # another condition: not shared
        ("a boy reads a book ", "a girl writes a letter", "the object", "3.0"),  # a trailing space: not the same text
        ("an old man walks", "a young man runs", "the age", "2.5"),
    ]
    data = load_data_files(
        {"train": _csv(tmp_path / "train.csv", TRAIN), "validation": _csv(tmp_path / "dev.csv", dev)}
    )
    first, *rest = data.summary.splitlines()
    assert first.startswith("--train_file ") and "conditional similarity" in first
    assert rest == [
        "warning: 2 of 5 --validation_file rows have the sentence1, sentence2 and condition of a --train_file row: "
        "metrics on them score inputs the model was trained on and overstate how it does on unseen inputs; training "
        "goes on."
    ]
    assert len(data.splits["validation"]) == 5 and len(data.splits["train"]) == 4  # counted, not removed


def test_a_pair_file_compares_its_two_sentences_and_the_test_file_is_counted_too(tmp_path):
    header = "sentence1,sentence2,label\n"
    train = [row[:2] + (row[3],) for row in TRAIN]
    files = {
        "train": _csv(tmp_path / "train.csv", train, header),
        "validation": _csv(tmp_path / "dev.csv", [("a fresh sentence", "another one", "2.0"), train[0]], header),
        "test": _csv(tmp_path / "test.csv", [train[1], train[2], ("a new pair", "of sentences", "2.0")], header),
    }
    (line,) = _overlap_lines(load_data_files(files).summary)
    assert line.startswith(
        "warning: 1 of 2 --validation_file rows have the sentence1 and sentence2 of a --train_file row; 2 of 3 "
        "--test_file rows have the sentence1 and sentence2 of a --train_file row: "
    )


def test_files_without_shared_rows_get_no_warning_line(tmp_path):
    dev = [("an old man walks", "a young man runs", "the age", "2.5"), ("a man plays a guitar", "x", "y", "2.0")]
    files = {"train": _csv(tmp_path / "train.csv", TRAIN), "validation": _csv(tmp_path / "dev.csv", dev)}
    summary = load_data_files(files).summary
    assert "\n" not in summary and "warning" not in summary and summary.endswith("rows: 4 train, 2 validation.")


def test_the_training_file_given_as_the_validation_file_is_named_as_such(tmp_path):
    train = _csv(tmp_path / "train.csv", TRAIN)
    (tmp_path / "sub").mkdir()
    again = str(tmp_path / "sub" / ".." / "train.csv")  # the same file, spelt another way
    (line,) = _overlap_lines(load_data_files({"train": train, "validation": again}).summary)
    assert line.startswith(
        "warning: --validation_file is the --train_file itself, so all 4 of its rows are training rows: metrics on "
        "them score inputs the model was trained on"
    )


def test_training_goes_on_and_logs_the_warning_when_dev_is_the_training_file(tmp_path, caplog):
    train = _csv(tmp_path / "train.csv", TRAIN)
    argv = ["--model", "cross-encoder", "--train_file", train, "--validation_file", train]
    with caplog.at_level(logging.WARNING):
        result = main([*argv, "--output_dir", str(tmp_path / "run"), *TINY])
    assert result["train_rows"] == 4 and result["validation_rows"] == 4 and "validation_spearman" in result["metrics"]
    assert (tmp_path / "run" / "metrics.json").is_file()
    logged = [r.getMessage() for r in caplog.records if "--train_file" in r.getMessage()]
    assert len(logged) == 1 and "--validation_file is the --train_file itself, so all 4 of its rows" in logged[0]
