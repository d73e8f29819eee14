"""Data loaders: schemas per task kind, held-out splits, derived splits and clear errors on bad files."""

import csv
import math

import pytest
from datasets import ClassLabel

from pairzoo.training.data import (
    dataset_files,
    dataset_task,
    label_range,
    list_datasets,
    load_csts,
    load_dataset,
    load_kg_entities,
    resolve_data_dir,
)

EXPECTED_COLUMNS = {
    "pair-regression": ["sentence1", "sentence2", "label"],
    "pair-classification": ["sentence1", "sentence2", "label"],
    "conditional-similarity": ["sentence1", "sentence2", "condition", "label"],
    "conditional-classification": ["sentence1", "condition", "label"],
    "kg-triples": ["head_id", "head", "relation", "tail_id", "tail"],
}
# Row counts stated in the shared data's MANIFEST.md (train/validation as the loaders define them).
MANIFEST_ROWS = {
    "stsb": {"train": 5749, "validation": 1500},
    "sick-r": {"train": 4439, "validation": 495},
    "sick-e": {"train": 4439, "validation": 495},
    "mrpc": {"train": 3668, "validation": 408},
    "rte": {"train": 2490, "validation": 277},
    "wn18rr": {"train": 86835, "validation": 3034},
}


@pytest.mark.parametrize("name", [n for n in list_datasets() if n not in ("csts", "synthetic")])
def test_every_shared_dataset_loads_with_its_schema(name, data_dir):
    data = load_dataset(name, data_dir=data_dir)
    assert {"train", "validation"} <= set(data) or set(data) == {"validation"}
    assert "test" not in data, "labelled test splits are held out"
    for split, dataset in data.items():
        assert (
            dataset.column_names[: len(EXPECTED_COLUMNS[dataset_task(name)])] == EXPECTED_COLUMNS[dataset_task(name)]
        )
        assert len(dataset) > 0
        if name in MANIFEST_ROWS:
            assert len(dataset) == MANIFEST_ROWS[name][split], (name, split)


def test_absa_drops_conflict_and_splits_train_deterministically(data_dir):
    first = load_dataset("absa-restaurants", data_dir=data_dir)
    again = load_dataset("absa-restaurants", data_dir=data_dir)
    assert len(first["train"]) + len(first["validation"]) == 3693 - 91  # MANIFEST: terms minus conflict
    assert first["validation"]["condition"] == again["validation"]["condition"]
    assert isinstance(first["train"].features["label"], ClassLabel)
    assert set(first["train"].features["label"].names) == {"positive", "neutral", "negative"}
    other_seed = load_dataset("absa-restaurants", data_dir=data_dir, seed=1)
    assert other_seed["validation"]["condition"] != first["validation"]["condition"]


def test_snli_keeps_explanations(data_dir):
    snli = load_dataset("snli", data_dir=data_dir)["validation"]
    assert len(snli) == 9842
    assert {"explanation_1", "explanation_2", "explanation_3"} <= set(snli.column_names)


def test_wn18rr_entities_and_texts(data_dir):
    entities = load_kg_entities(data_dir)
    assert len(entities) == 40943
    dev = load_dataset("wn18rr", data_dir=data_dir, split="validation")["validation"]
    row = dev[0]
    assert row["head"] and row["tail"] and not row["relation"].startswith("_")


def test_missing_split_is_a_clear_error(data_dir):
    with pytest.raises(FileNotFoundError, match="sts-test.tsv"):
        load_dataset("stsb", data_dir=data_dir, split="test")
    with pytest.raises(FileNotFoundError, match="held out"):
        load_dataset("sick-e", data_dir=data_dir, split="test")


def test_missing_folder_and_file_name_the_path(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_dataset("mrpc", data_dir=tmp_path / "nowhere")
    (tmp_path / "MRPC").mkdir()
    with pytest.raises(FileNotFoundError, match="dev.tsv"):
        load_dataset("mrpc", data_dir=tmp_path, split="validation")
    monkeypatch.setenv("PAIRZOO_DATA_DIR", str(tmp_path / "also-missing"))
    with pytest.raises(FileNotFoundError, match="also-missing"):
        resolve_data_dir()


def test_unknown_dataset_and_split_names():
    with pytest.raises(ValueError, match="Unknown dataset 'imdb'"):
        load_dataset("imdb")
    with pytest.raises(ValueError, match="split"):
        load_dataset("synthetic", split="dev")


def test_malformed_tsv_and_bad_labels_name_file_and_line(tmp_path):
    folder = tmp_path / "RTE"
    folder.mkdir()
    (folder / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\tentailment\n1\tonly two\n")
    with pytest.raises(ValueError, match=r"dev.tsv' line 3"):
        load_dataset("rte", data_dir=tmp_path, split="validation")
    (folder / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\tmaybe\n")
    with pytest.raises(ValueError, match="'maybe' is not one of"):
        load_dataset("rte", data_dir=tmp_path, split="validation")
    (folder / "dev.tsv").write_bytes(b"index\tsentence1\tsentence2\tlabel\n0\t\xff\xfe\tB.\tentailment\n")
    with pytest.raises(ValueError, match="not valid UTF-8"):
        load_dataset("rte", data_dir=tmp_path, split="validation")


def _write_csts(path, rows, columns=("sentence1", "sentence2", "condition", "label")):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        writer.writerows(rows)


def test_csts_csv_folder_and_validation(tmp_path):
    rows = [["A man runs.", "A man walks.", "The activity.", "2"], ["A cat.", "A dog.", "The animal.", "1"]]
    _write_csts(tmp_path / "csts_train.csv", rows)
    _write_csts(tmp_path / "csts_validation.csv", rows)
    _write_csts(tmp_path / "csts_test.csv", [[*r[:3], ""] for r in rows])
    data = load_csts(tmp_path)
    assert set(data) == {"train", "validation", "test"}
    assert data["train"][0] == {
        "sentence1": "A man runs.",
        "sentence2": "A man walks.",
        "condition": "The activity.",
        "label": 2.0,
    }
    assert all(math.isnan(x) for x in data["test"]["label"])
    assert load_dataset("csts", csts_path=tmp_path)["validation"].num_rows == 2


@pytest.mark.parametrize(
    "rows, columns, message",
    [
        ([["a", "b", "c", "7"]], ("sentence1", "sentence2", "condition", "label"), "outside"),
        ([["a", "b", "c", "x"]], ("sentence1", "sentence2", "condition", "label"), "not a number"),
        ([["a", "b", "", "3"]], ("sentence1", "sentence2", "condition", "label"), "`condition` is empty"),
        ([["  ", "b", "c", "3"]], ("sentence1", "sentence2", "condition", "label"), "`sentence1` is empty"),
        ([["a", "b", "3"]], ("sentence1", "sentence2", "label"), r"missing columns \['condition'\]"),
        ([["a", "b", "c", ""]], ("sentence1", "sentence2", "condition", "label"), "`label` is empty"),
    ],
)
def test_csts_csv_errors_name_the_problem(tmp_path, rows, columns, message):
    path = tmp_path / "bad.csv"
    _write_csts(path, rows, columns)
    with pytest.raises(ValueError, match=message):
        load_csts(path)


def test_csts_needs_a_path_and_existing_files(tmp_path):
    with pytest.raises(ValueError, match="csts_path"):
        load_dataset("csts")
    with pytest.raises(FileNotFoundError, match="csts_train.csv"):
        load_csts(tmp_path)


def test_label_ranges():
    assert label_range("stsb") == (0.0, 5.0)
    assert label_range("synthetic") == (1.0, 5.0)
    assert label_range("mrpc") is None


def test_dataset_files_names_what_the_loader_reads(tmp_path, data_dir):
    assert dataset_files("synthetic") == [] and dataset_files("hub:org/set", "train") == []
    assert dataset_files("sick-e", "train") == dataset_files("sick-e", "validation") == ["SICK/SICK.txt"]
    assert dataset_files("snli", "validation") == [
        "e-SNLI/labels.dev",
        *(f"e-SNLI/{stem}.dev" for stem in ("s1", "s2", "preproc1_expl_1", "preproc1_expl_2", "preproc1_expl_3")),
    ]
    assert dataset_files("wn18rr", "validation") == [
        "WN18RR/entity2text.txt",
        "WN18RR/relation2text.txt",
        "WN18RR/dev.tsv",
    ]
    for name, split, named in (("csts", None, "csts_path"), ("nope", None, "nope"), ("wn18rr", "dev", "'dev'")):
        with pytest.raises(ValueError, match=named):
            dataset_files(name, split)
    # the listed files are exactly what the loader needs: copied alone into an empty folder, the split loads
    for name in ("snli", "mrpc", "wn18rr", "absa-laptops"):
        folder = tmp_path / name
        for rel in dataset_files(name, "validation"):
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_bytes((data_dir / rel).read_bytes())
        assert len(load_dataset(name, data_dir=folder, split="validation")["validation"]) > 0
