"""Edge cases of own data files (`--train_file`, `--validation_file`): file encodings and layouts, label spellings,
the class mapping of the splits and of the export, and the files that are refused with one line."""

import json

import pandas as pd
import pytest
from transformers import pipeline

from pairzoo.train import console_main
from pairzoo.training.cli import main
from pairzoo.training.data import load_data_files

TINY = ["--backbone", "tiny-bert", "--per_device_train_batch_size", "4", "--max_length", "48", "--eval_strategy",
        "no", "--report_to", "none", "--disable_tqdm", "true"]  # fmt: skip
HEADER = "sentence1,sentence2,label\n"
WORDS = "a man plays the red guitar while two women sing on a busy street near the old station".split()


def _text(i: int, offset: int = 0) -> str:
    return " ".join(WORDS[(i + offset) % 7 : (i + offset) % 7 + 3 + i % 5])


def _csv(path, labels: list, header: str = HEADER) -> str:
    path.write_text(header + "".join(f"{_text(i)},{_text(i, 3)},{label}\n" for i, label in enumerate(labels)))
    return str(path)


def _files(tmp_path, train_labels: list, validation_labels: list) -> dict:
    return {
        "train": _csv(tmp_path / "train.csv", train_labels),
        "validation": _csv(tmp_path / "dev.csv", validation_labels),
    }


def test_class_names_with_spaces_around_them_are_one_class(tmp_path):
    data = load_data_files(_files(tmp_path, ["yes", " yes", "no ", "no"], [" no", "yes "]))
    assert data.label_names == ["no", "yes"]
    assert data.splits["train"]["label"] == [1, 1, 0, 0] and data.splits["validation"]["label"] == [0, 1]


def test_every_split_gets_the_training_files_class_ids_whatever_its_order_and_classes(tmp_path):
    data = load_data_files(_files(tmp_path, ["pos", "neg", "neu", "pos"], ["neu", "pos", "neu"]))
    assert data.label_names == ["neg", "neu", "pos"]
    assert data.splits["train"]["label"] == [2, 0, 1, 2] and data.splits["validation"]["label"] == [1, 2, 1]


def test_numeric_label_spellings_are_the_class_ids_they_write(tmp_path):
    data = load_data_files(_files(tmp_path, ["0", " 2 ", "1", "2"], ["1.0", " 0"]))
    assert data.task == "pair-classification" and data.label_names == ["0", "1", "2"]
    assert data.splits["train"]["label"] == [0, 2, 1, 2] and data.splits["validation"]["label"] == [1, 0]


def test_a_label_python_alone_reads_as_a_number_is_a_class_name(tmp_path):
    with pytest.raises(ValueError, match=r"train.csv' row 3: `label` '1_0' is not a number, and the other labels"):
        load_data_files(_files(tmp_path, ["1", "1_0", "2"], ["1"]))


def test_csv_with_bom_crlf_quoted_newlines_blank_lines_and_columns_in_another_order(tmp_path):
    train = tmp_path / "train.csv"
    train.write_bytes(
        b'\xef\xbb\xbfsentence1,sentence2,label\r\n"two men,\r\nsinging",a man sings,yes\r\n\r\nx y,z w,no\r\n\r\n'
    )
    dev = tmp_path / "dev.csv"
    dev.write_text("id,label,sentence2,sentence1\n7,no,a b,c d\n")
    data = load_data_files({"train": str(train), "validation": str(dev)})
    assert data.splits["train"].to_dict() == {
        "sentence1": ["two men,\r\nsinging", "x y"],
        "sentence2": ["a man sings", "z w"],
        "label": [1, 0],
    }
    assert data.splits["validation"].to_dict() == {"sentence1": ["c d"], "sentence2": ["a b"], "label": [0]}


def test_a_json_file_of_one_array_reads_as_json_lines(tmp_path):
    rows = [{"sentence1": _text(i), "sentence2": _text(i, 2), "label": ["no", "yes"][i % 2]} for i in range(4)]
    (tmp_path / "train.json").write_text(json.dumps(rows))
    (tmp_path / "dev.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows[:2]))
    data = load_data_files({"train": str(tmp_path / "train.json"), "validation": str(tmp_path / "dev.jsonl")})
    assert data.label_names == ["no", "yes"] and data.splits["train"]["label"] == [0, 1, 0, 1]


def test_a_run_on_class_names_exports_them_and_its_pipeline_answers_with_them(tmp_path):
    files = _files(tmp_path, ["yes", "no", "maybe"] * 4, ["maybe", "yes"])
    out = tmp_path / "run"
    args = ["--train_file", files["train"], "--validation_file", files["validation"], "--output_dir", str(out)]
    result = main([*args, *TINY, "--max_steps", "1", "--save_strategy", "no"])
    assert result["label_names"] == ["maybe", "no", "yes"]
    config = json.loads((out / "export" / "config.json").read_text())
    assert config["id2label"] == {"0": "maybe", "1": "no", "2": "yes"}
    assert config["label2id"] == {"maybe": 0, "no": 1, "yes": 2}
    scorer = pipeline("pair-similarity", model=str(out / "export"), trust_remote_code=True)
    assert scorer({"text": _text(1), "text_pair": _text(2)})["label"] in {"maybe", "no", "yes"}


def test_resuming_with_a_data_file_of_other_classes_is_refused(tmp_path, capsys):
    files = _files(tmp_path, ["yes", "no"] * 4, ["yes", "no"])
    out = tmp_path / "run"
    args = ["--train_file", files["train"], "--validation_file", files["validation"], "--output_dir", str(out)]
    main([*args, *TINY, "--max_steps", "1", "--save_strategy", "steps", "--save_steps", "1", "--no_export"])
    before = sorted(path.name for path in out.iterdir())
    capsys.readouterr()
    (tmp_path / "renamed").mkdir()
    renamed = _files(tmp_path / "renamed", ["yes", "nope"] * 4, ["yes", "nope"])
    argv = ["--train_file", renamed["train"], "--validation_file", renamed["validation"], "--output_dir", str(out)]
    assert console_main([*argv, *TINY, "--max_steps", "2", "--resume_from_checkpoint", "last"]) == 2
    err = capsys.readouterr().err
    assert (
        "was written by another model or configuration: `id2label.0` 'no' in the checkpoint, 'nope' in this run" in err
    )
    assert "--train_file" in err and err.count("\n") == 1
    assert sorted(path.name for path in out.iterdir()) == before


def _empty_csv(tmp_path):
    (tmp_path / "dev.csv").write_text(HEADER + "\n\n")
    return "validation", "dev.csv", "`--validation_file` '{}' has no rows."


def _empty_tsv(tmp_path):
    (tmp_path / "dev.tsv").write_text("sentence1\tsentence2\tlabel\n")
    return "validation", "dev.tsv", "`--validation_file` '{}' has no rows."


def _empty_jsonl(tmp_path):
    (tmp_path / "dev.jsonl").write_text("\n\n")
    return "validation", "dev.jsonl", "`--validation_file` '{}' has no rows."


def _empty_json_array(tmp_path):
    (tmp_path / "dev.json").write_text("[ ]")
    return "validation", "dev.json", "`--validation_file` '{}' has no rows."


def _empty_parquet(tmp_path):
    frame = pd.DataFrame({"sentence1": pd.Series([], dtype=str), "sentence2": pd.Series([], dtype=str)})
    frame.assign(label=pd.Series([], dtype=str)).to_parquet(tmp_path / "dev.parquet")
    return "validation", "dev.parquet", "`--validation_file` '{}' has no rows."


def _jsonl_not_utf8(tmp_path):
    row = b'{"sentence1": "%s", "sentence2": "b", "label": "no"}\n'
    (tmp_path / "dev.jsonl").write_bytes(row % b"ok" + row % b"caf\xe9 au lait")
    return "validation", "dev.jsonl", "'{}' row 2: `sentence1` is not valid UTF-8 text."


def _delimiter_at_line_ends(tmp_path):  # pandas would take the first field for a row index and shift every column
    (tmp_path / "dev.csv").write_text(HEADER + "a b,c d,yes,0.5\ne f,g h,no,0.25\n")
    return "validation", "dev.csv", "`--validation_file` '{}': its first row has 4 fields and its header names 3"


def _condition_column_in_other_case(tmp_path):  # silently a pair task without it
    (tmp_path / "conditions.csv").write_text("sentence1,sentence2,Condition,label\na b,c d,the colour,1.5\n")
    return "train", "conditions.csv", "has no column 'condition' (--condition_column; its columns: "


def _label_column_with_a_space(tmp_path):
    (tmp_path / "dev.csv").write_text("sentence1,sentence2,label \na b,c d,yes\n")
    columns = "(its columns: ['sentence1', 'sentence2', 'label ']); column 'label ' differs from it only in case"
    return (
        "validation",
        "dev.csv",
        f"dev.csv' has no column 'label' (--label_column), which the training file has {columns}",
    )


@pytest.mark.parametrize(
    "case",
    [
        _empty_csv,
        _empty_tsv,
        _empty_jsonl,
        _empty_json_array,
        _empty_parquet,
        _jsonl_not_utf8,
        _delimiter_at_line_ends,
        _condition_column_in_other_case,
        _label_column_with_a_space,
    ],
)
def test_bad_own_data_file_fails_with_one_line_naming_it_and_writes_nothing(tmp_path, capsys, case):
    split, name, message = case(tmp_path)
    path = str(tmp_path / name)
    files = {
        "train": _csv(tmp_path / "train.csv", ["yes", "no", "yes"]),
        "validation": _csv(tmp_path / "ok.csv", ["no"]),
    }
    files[split] = path
    out = tmp_path / "never"
    argv = ["--train_file", files["train"], "--validation_file", files["validation"], "--output_dir", str(out), *TINY]
    assert console_main([*argv, "--max_steps", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pairzoo.train: error: ") and err.count("\n") == 1, err
    assert message.format(path) in err, err
    assert not out.exists()


def test_a_column_written_in_another_case_or_with_spaces_is_pointed_at(tmp_path):
    train = tmp_path / "train.csv"
    train.write_text("Sentence1,sentence2,label\na b,c d,yes\n")
    with pytest.raises(
        ValueError, match=r"set --sentence1_column .*; column 'Sentence1' differs from it only in case"
    ):
        load_data_files({"train": str(train), "validation": str(train)})
    spaced = tmp_path / "spaced.csv"
    spaced.write_text("sentence1,sentence2, condition,label\na b,c d,the colour,1.5\ne f,g h,the place,2.5\n")
    with pytest.raises(ValueError, match=r"but column ' condition' differs from it only in case or spaces: rename it"):
        load_data_files({"train": str(spaced), "validation": str(spaced)})


def test_class_ids_written_as_floats_train_scores_and_the_summary_says_how_to_get_classes(tmp_path):
    data = load_data_files(_files(tmp_path, ["0.0", "1.0", "1.0", "0.0"], ["1.0", "0.0"]))
    assert data.task == "pair-regression"
    assert "whole number written as a float" in data.summary and "0 and 1, they would be classes" in data.summary
    scores = load_data_files(_files(tmp_path, ["0.5", "1.0", "4.2", "3.0"], ["1.0", "2.5"]))
    assert scores.task == "pair-regression" and "written as a float" not in scores.summary
    classes = load_data_files(_files(tmp_path, ["0", "1", "1", "0"], ["1", "0"]))
    assert classes.task == "pair-classification"


def test_integer_labels_far_from_0_say_how_many_class_ids_no_row_has(tmp_path):
    data = load_data_files(_files(tmp_path, [1990, 2000, 2000, 1990], [2000, 1990]))
    assert data.task == "pair-classification" and len(data.label_names) == 2001
    assert "class ids 0..2000 (integer labels; 1999 of these ids no training row has" in data.summary
    assert "no training row has" not in load_data_files(_files(tmp_path, [0, 1, 2, 1], [2, 0])).summary
