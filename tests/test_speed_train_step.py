"""The training-step benchmark: both arms train and are timed on the same pairs, the ratio is their quotient, the
result is written where asked; STS-B's train split is read when the data folder has it; bad flags are one clear error
before anything is written."""

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import speed_train_step  # noqa: E402

STSB_HEADER = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
STSB_ROWS = [
    ("A plane is taking off.", "An air plane is taking off.", 5.0),
    ("A man is playing a flute.", "A man is eating.", 2.5),
    ("A cat sits on the mat.", "A dog runs in the park.", 0.0),
]


def _stsb_folder(root: Path) -> Path:
    """A data folder whose STS-B/train.tsv holds `STSB_ROWS` in GLUE's layout."""
    rows = [f"{i}\tmain\tMSRvid\t2012\t{i:04d}\tnone\t-\t{a}\t{b}\t{y:.3f}" for i, (a, b, y) in enumerate(STSB_ROWS)]
    lines = [STSB_HEADER, *rows]
    (root / "STS-B").mkdir(parents=True)
    (root / "STS-B" / "train.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_both_arms_are_timed_on_the_synthetic_pairs_and_the_result_is_written(tmp_path):
    empty = tmp_path / "no-data"
    empty.mkdir()
    out = tmp_path / "out"
    argv = ["--backbone", "tiny-bert", "--steps", "1", "--repeats", "1", "--batch_size", "2", "--device", "cpu"]
    result = speed_train_step.main([*argv, "--data_dir", str(empty), "--output_dir", str(out)])
    ours, theirs = result["pairzoo"], result["sentence-transformers"]
    assert all(math.isfinite(seconds) and seconds > 0 for seconds in (ours, theirs))
    assert result["ratio"] == ours / theirs
    assert result["data"] == "synthetic" and result["pairs"] == speed_train_step.SYNTHETIC_PAIRS
    assert (result["backbone"], result["batch_size"], result["steps"], result["device"]) == ("tiny-bert", 2, 1, "cpu")
    assert json.loads((out / speed_train_step.RESULT_FILE).read_text(encoding="utf-8")) == result
    assert sorted(p.name for p in out.iterdir()) == [speed_train_step.RESULT_FILE]


def test_the_pairs_are_stsb_train_when_the_data_folder_holds_it(tmp_path):
    data, rows = speed_train_step.training_rows(str(_stsb_folder(tmp_path / "data")), batch_size=2)
    assert data == "STS-B train"
    assert [(r["sentence1"], r["sentence2"], r["label"]) for r in rows] == STSB_ROWS


def test_without_stsb_the_pairs_are_random_and_fill_at_least_one_batch(tmp_path):
    data, rows = speed_train_step.training_rows(str(tmp_path), batch_size=1000)
    assert data == "synthetic" and len(rows) == 1000
    assert all(0.0 <= r["label"] <= 5.0 and r["sentence1"] and r["sentence2"] for r in rows)
    assert speed_train_step.training_rows(str(tmp_path), batch_size=2)[1] == rows[: speed_train_step.SYNTHETIC_PAIRS]


@pytest.mark.parametrize(
    "flags, error, named",
    [
        (["--steps", "0"], ValueError, "--steps"),
        (["--batch_size", "0"], ValueError, "--batch_size"),
        (["--repeats", "-1"], ValueError, "--repeats"),
        (["--steps", "two"], ValueError, "--steps"),
        (["--device", "tpu"], ValueError, "--device"),
        (["--device", "mps"], ValueError, "--device"),
        (["--data_dir", "{tmp}/missing"], FileNotFoundError, "--data_dir"),
        (["--data_dir", "{tmp}/data", "--batch_size", "4"], ValueError, "--batch_size"),
        (["--output_dir", "{tmp}/a-file/out"], ValueError, "--output_dir"),
    ],
)
def test_a_bad_flag_is_one_error_naming_it_and_nothing_is_written(tmp_path, flags, error, named):
    _stsb_folder(tmp_path / "data")
    (tmp_path / "a-file").write_text("not a folder", encoding="utf-8")
    before = sorted(tmp_path.rglob("*"))
    argv = ["--backbone", "tiny-bert", "--output_dir", str(tmp_path / "out")]
    argv += [flag.format(tmp=tmp_path) for flag in flags]
    with pytest.raises(error, match=named) as raised:
        speed_train_step.main(argv)
    assert "\n" not in str(raised.value)
    assert sorted(tmp_path.rglob("*")) == before
