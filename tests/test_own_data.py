"""`pairzoo.train` on your own files (`--train_file`, `--validation_file`, `--test_file`): every task kind from CSV,
TSV, JSON lines and Parquet, the task and labels inferred, the clear errors; `pairzoo.train_kg --kg_dir`."""

import csv
import json
import logging
import re

import pandas as pd
import pytest

from pairzoo.hub_cards.export import load_export
from pairzoo.train_kg import console_main as kg_console_main
from pairzoo.training.cli import main
from pairzoo.training.data import load_data_files

TINY = ["--backbone", "tiny-bert", "--max_steps", "2", "--per_device_train_batch_size", "4", "--max_length", "48",
        "--eval_strategy", "no", "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true"]  # fmt: skip

WORDS = "a man plays the red guitar while two women sing on a busy street near the old station".split()


def _text(i: int, offset: int = 0) -> str:
    return " ".join(WORDS[(i + offset) % 7 : (i + offset) % 7 + 3 + i % 5])


def _write(path, rows: "list[dict]"):
    """`rows` as a file of the format `path`'s suffix names."""
    suffix = path.suffix
    if suffix == ".csv":
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    elif suffix == ".tsv":  # no quoting: a quote is part of the text
        lines = ["\t".join(rows[0])] + ["\t".join(str(value) for value in row.values()) for row in rows]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    elif suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    else:
        pd.DataFrame(rows).to_parquet(path)
    return str(path)


def _rows(n: int, label, sentence2: "str | None" = "sentence2", condition: "str | None" = None, s1="sentence1"):
    rows = []
    for i in range(n):
        row = {s1: _text(i)}
        if sentence2:
            row[sentence2] = _text(i, 3)
        if condition:
            row[condition] = ["the colour", "the number of people", "the place"][i % 3]
        row["label"] = label(i)
        rows.append(row)
    return rows


def _run(tmp_path, files: dict, *flags: str, model: str = "cross-encoder") -> dict:
    """`pairzoo.train` of `model` on `files` (split -> path) for two steps."""
    argv = [item for split, path in files.items() for item in (f"--{split}_file", path)]
    return main(["--model", model, *argv, "--output_dir", str(tmp_path / "run"), *TINY, *flags])


def test_pair_regression_from_csv_with_named_columns_and_a_tsv_test_file(tmp_path, caplog):
    rows = _rows(12, lambda i: [0.5, 2.0, 3.5, 4.5][i % 4], sentence2="hypothesis", s1="premise")
    files = {
        "train": _write(tmp_path / "train.csv", rows[:8]),
        "validation": _write(tmp_path / "dev.csv", rows[8:11] + [{**rows[0], "premise": 'He said "hi, there"'}]),
        "test": _write(tmp_path / "test.tsv", [{**r, "premise": r["premise"] + ' "quoted'} for r in rows[2:6]]),
    }
    with caplog.at_level(logging.WARNING):
        result = _run(tmp_path, files, "--sentence1_column", "premise", "--sentence2_column", "hypothesis")
    assert result["task"] == "pair-regression" and result["dataset"] == "train.csv"
    assert result["label_range"] == [0.5, 4.5]  # the training file's min and max
    assert (result["train_rows"], result["validation_rows"], result["test_rows"]) == (8, 4, 4)
    assert {"validation_spearman", "validation_mse", "test_spearman", "test_pearson"} <= set(result["metrics"])
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert saved["data_files"] == files and saved["metrics"]["test_mse"] == pytest.approx(
        result["metrics"]["test_mse"]
    )
    summary = [r.getMessage() for r in caplog.records if "--train_file" in r.getMessage()]
    assert len(summary) == 1 and "pair regression" in summary[0] and "[0.5, 4.5]" in summary[0]
    assert "sentence1 <- 'premise'" in summary[0] and "sentence2 <- 'hypothesis'" in summary[0]
    model, _ = load_export(tmp_path / "run" / "export")
    assert (model.config.label_min, model.config.label_max) == (0.5, 4.5)
    card = (tmp_path / "run" / "export" / "README.md").read_text()
    assert "dev.csv" in card and "test.tsv" in card and 'pipeline("pair-similarity"' in card


def test_pair_classification_from_jsonl_class_names_sorted(tmp_path, caplog):
    names = ["neutral", "entailment", "contradiction"]
    rows = _rows(12, lambda i: names[i % 3])
    files = {
        "train": _write(tmp_path / "train.jsonl", rows[:9]),
        "validation": _write(tmp_path / "dev.jsonl", rows[9:]),
    }
    with caplog.at_level(logging.WARNING):
        result = _run(tmp_path, files)
    assert result["task"] == "pair-classification"
    assert result["label_names"] == ["contradiction", "entailment", "neutral"]
    assert {"validation_accuracy", "validation_f1"} <= set(result["metrics"])
    assert "classes from the label names, sorted: 0 = 'contradiction'" in caplog.text
    model, _ = load_export(tmp_path / "run" / "export")
    assert model.config.id2label == {0: "contradiction", 1: "entailment", 2: "neutral"}


def test_conditional_similarity_from_parquet_with_the_label_range_flags(tmp_path):
    rows = _rows(10, lambda i: 1.0 + i % 4, condition="aspect")
    files = {"train": _write(tmp_path / "t.parquet", rows[:7]), "validation": _write(tmp_path / "v.parquet", rows[7:])}
    result = _run(
        tmp_path, files, "--condition_column", "aspect", "--label_min", "1", "--label_max", "5", model="seaver"
    )
    assert result["task"] == "conditional-similarity" and result["label_range"] == [1.0, 5.0]
    assert {"validation_spearman", "validation_pearson"} <= set(result["metrics"])
    card = (tmp_path / "run" / "export" / "README.md").read_text()
    assert 'pipeline("conditional-similarity"' in card


def test_conditional_classification_from_tsv_with_integer_class_ids(tmp_path, caplog):
    rows = _rows(10, lambda i: i % 3, sentence2=None, condition="condition")
    files = {"train": _write(tmp_path / "t.tsv", rows[:7]), "validation": _write(tmp_path / "v.tsv", rows[7:])}
    with caplog.at_level(logging.WARNING):
        result = _run(tmp_path, files, "--export", "false")
    assert result["task"] == "conditional-classification" and result["label_names"] == ["0", "1", "2"]
    assert "validation_accuracy" in result["metrics"] and result["validation_rows"] == 3
    assert "conditional classification" in caplog.text and "class ids 0..2" in caplog.text


def test_integer_labels_with_the_range_flags_are_regression_scores(tmp_path):
    rows = _rows(6, lambda i: [0, 5, 2, 3, 3, 2][i])
    files = {"train": _write(tmp_path / "t.csv", rows[:4]), "validation": _write(tmp_path / "v.csv", rows[4:])}
    classes = load_data_files(files)
    assert classes.task == "pair-classification" and classes.label_names == ["0", "1", "2", "3", "4", "5"]
    assert classes.splits["validation"]["label"] == [3, 2]
    scores = load_data_files(files, label_min=0, label_max=10)
    assert scores.task == "pair-regression" and scores.label_range == (0.0, 10.0)
    assert scores.splits["validation"]["label"] == [3.0, 2.0]
    only_regression = load_data_files(files, tasks=("pair-regression",))  # a model that trains no pair classes
    assert only_regression.task == "pair-regression" and only_regression.label_range == (0.0, 5.0)


def _bad(tmp_path, train_rows, validation_rows, suffix=".csv"):
    return [
        "--train_file", _write(tmp_path / f"train{suffix}", train_rows),
        "--validation_file", _write(tmp_path / f"dev{suffix}", validation_rows),
    ]  # fmt: skip


def _case_missing_sentence1(tmp_path):
    rows = _rows(4, float, s1="text")
    return _bad(tmp_path, rows, rows), "no column 'sentence1' (--sentence1_column; its columns: ['text'"


def _case_named_column_missing(tmp_path):
    rows = _rows(4, float)
    return [*_bad(tmp_path, rows, rows), "--condition_column", "aspect"], "no column 'aspect' (--condition_column"


def _case_validation_lacks_a_column(tmp_path):
    args = _bad(tmp_path, _rows(4, float), _rows(4, float, sentence2="s2"))
    return args, "dev.csv' has no column 'sentence2' (--sentence2_column), which the training file has"


def _case_label_not_a_number(tmp_path):
    rows = _rows(4, float)
    rows[2]["label"] = "n/a"
    return _bad(tmp_path, rows, _rows(4, float)), "train.csv' row 4: `label` 'n/a' is not a number, and the other"


def _case_validation_class_unseen(tmp_path):
    dev = _rows(2, lambda i: ["yes", "maybe"][i])
    args = _bad(tmp_path, _rows(4, lambda i: ["yes", "no"][i % 2]), dev, ".jsonl")
    return args, "dev.jsonl' row 2: `label` 'maybe' is not a class of the training file (its classes: ['no', 'yes'])"


def _case_validation_score_outside(tmp_path):
    args = _bad(tmp_path, _rows(4, lambda i: 1.0 + i), _rows(3, lambda i: 2.0 + 1.25 * i))
    return args, "dev.csv' row 4: `label` 4.5 is outside the label range [1, 4] (the training labels' min/max)"


def _case_empty_text(tmp_path):
    rows = _rows(4, float)
    rows[1]["sentence2"] = "  "
    return _bad(tmp_path, rows, rows, ".tsv"), "train.tsv' row 3: `sentence2` is empty"


def _case_one_class(tmp_path):
    return _bad(tmp_path, _rows(4, lambda i: "yes"), _rows(2, lambda i: "yes")), "every `label` is 'yes'"


def _case_both_sources(tmp_path):
    return ["--dataset", "stsb", *_bad(tmp_path, _rows(4, float), _rows(4, float))], "mutually exclusive"


def _case_no_validation_file(tmp_path):
    return ["--train_file", _write(tmp_path / "t.csv", _rows(4, float))], "`--train_file` needs `--validation_file`"


def _case_flag_without_train_file(tmp_path):
    return ["--label_column", "score"], "`--label_column` is read with --train_file only"


def _case_unknown_suffix(tmp_path):
    (tmp_path / "t.txt").write_text("sentence1,sentence2,label\n")
    return ["--train_file", str(tmp_path / "t.txt"), "--validation_file", "x.csv"], "unknown file type '.txt'"


def _case_model_cannot_read_the_task(tmp_path):
    rows = _rows(4, lambda i: "pos" if i % 2 else "neg", sentence2=None, condition="condition")
    return [*_bad(tmp_path, rows, rows), "--model", "comateformer"], "cannot train on --train_file"


def _case_class_names_with_pair_and_condition(tmp_path):
    rows = _rows(4, lambda i: "pos" if i % 2 else "neg", condition="condition")
    return _bad(tmp_path, rows, rows), "has a sentence pair and a condition with class labels: no pairzoo task"


@pytest.mark.parametrize(
    "case",
    [
        _case_missing_sentence1,
        _case_named_column_missing,
        _case_validation_lacks_a_column,
        _case_label_not_a_number,
        _case_validation_class_unseen,
        _case_validation_score_outside,
        _case_empty_text,
        _case_one_class,
        _case_both_sources,
        _case_no_validation_file,
        _case_flag_without_train_file,
        _case_unknown_suffix,
        _case_model_cannot_read_the_task,
        _case_class_names_with_pair_and_condition,
    ],
)
def test_bad_own_data_fails_with_one_clear_line_and_writes_nothing(tmp_path, capsys, case):
    from pairzoo.train import console_main

    args, message = case(tmp_path)
    out = tmp_path / "never"
    assert console_main(["--output_dir", str(out), *TINY, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pairzoo.train: error: ") and err.count("\n") == 1, err
    assert message in err, err
    assert not out.exists()


def test_a_missing_file_is_a_file_not_found_error_naming_its_flag(tmp_path):
    dev = _write(tmp_path / "dev.csv", _rows(4, float))
    with pytest.raises(FileNotFoundError, match="`--train_file` '.*nope.csv' does not exist"):
        main(
            ["--train_file", str(tmp_path / "nope.csv"), "--validation_file", dev, "--output_dir", str(tmp_path / "o")]
        )
    assert not (tmp_path / "o").exists()


# --------------------------------------------------------------------------------------------- knowledge graph


def _write_graph(folder):
    folder.mkdir(parents=True)
    texts = {"dog": "dog, a pet", "cat": "cat, a small pet", "animal": "animal, a living being", "oak": "oak, a tree",
             "tree": "tree, a woody plant", "plant": "plant, a living organism"}  # fmt: skip
    (folder / "entity2text.txt").write_text("".join(f"{e}\t{t}\n" for e, t in texts.items()))
    (folder / "relation2text.txt").write_text("_hypernym\thypernym\n_similar_to\tsimilar to\n")
    train = [("dog", "_hypernym", "animal"), ("cat", "_hypernym", "animal"), ("oak", "_hypernym", "tree"),
             ("tree", "_hypernym", "plant"), ("dog", "_similar_to", "cat")]  # fmt: skip
    (folder / "train.tsv").write_text("".join("\t".join(t) + "\n" for t in train))
    (folder / "dev.tsv").write_text("cat\t_similar_to\tdog\noak\t_similar_to\ttree\n")
    return str(folder)


def test_train_kg_reads_a_knowledge_graph_folder_in_the_wn18rr_layout(tmp_path, recwarn):
    kg_dir = _write_graph(tmp_path / "my_graph")
    out = tmp_path / "kg"
    argv = ["--backbone", "tiny-bert", "--kg_dir", kg_dir, "--output_dir", str(out), "--max_steps", "2",
            "--batch_size", "4", "--max_length", "16", "--eval_batch_size", "4", "--pre_batch", "0"]  # fmt: skip
    assert kg_console_main(argv) == 0
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["dev"]["num_entities"] == 6 and saved["dev"]["num_queries"] == 4  # 2 dev triples and their inverses
    assert saved["train_rows"] == 10 and saved["args"]["kg_dir"] == kg_dir
    assert "my_graph" in (out / "export" / "README.md").read_text()
    assert not [w for w in recwarn if "pin_memory" in str(w.message)]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--kg_dir", "KG", "--data_dir", "KG"], "`--kg_dir` and `--data_dir` are mutually exclusive"),
        (["--kg_dir", "MISSING"], "knowledge-graph folder '.*MISSING' \\(--kg_dir\\) does not exist"),
    ],
)
def test_bad_kg_dir_fails_clearly_and_writes_nothing(tmp_path, capsys, flags, message):
    kg_dir = _write_graph(tmp_path / "graph")
    flags = [kg_dir if f == "KG" else str(tmp_path / f) if f == "MISSING" else f for f in flags]
    out = tmp_path / "never"
    assert kg_console_main(["--backbone", "tiny-bert", "--output_dir", str(out), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pairzoo.train_kg: error: ") and re.search(message, err), err
    assert not out.exists()
