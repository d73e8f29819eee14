"""The edges of what a user hands to pairzoo: data files, backbones, lengths and pipeline inputs.

Each bad input raises one clear error naming the field, flag or file, before anything is written (the scratch folder
is snapshotted: every file, its size and mtime); each odd but valid input gets the correct result, or a warning where
the model would read nothing of a text.
"""

import csv
import logging
import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from datasets import ClassLabel, Dataset, Features, Value
from transformers import BertConfig, GPT2Config, T5Config, pipeline

from pairzoo import create_model, encode_conditional_inputs, load_tokenizer
from pairzoo.backbones import backbone_config
from pairzoo.hub_cards.export import export_model
from pairzoo.pipelines.pipeline_conditional_similarity import (
    default_max_length,
    encode_pair_inputs,
    encode_tri_inputs,
    unknown_only_segments,
)
from pairzoo.registry import get_model_spec
from pairzoo.training.cli import main as train_main
from pairzoo.training.collators import check_training_data, make_collator
from pairzoo.training.data import load_csts, load_dataset

TINY = ["--backbone", "tiny-bert", "--max_steps", "1", "--per_device_train_batch_size", "4",
        "--eval_strategy", "no", "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true"]  # fmt: skip
STSB_HEADER = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
SICK_HEADER = (
    "pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\tentailment_AB\tentailment_BA\t"
    "sentence_A_original\tsentence_B_original\tsentence_A_dataset\tsentence_B_dataset\tSemEval_set\n"
)
CSTS_COLUMNS = ("sentence1", "sentence2", "condition", "label")
OK = {"sentence1": "A man walks.", "sentence2": "A man runs.", "condition": "The activity."}
PAIR_OK = {"text": "A man walks.", "text_pair": "A man runs."}
EMOJI = "\U0001f600\U0001f600"  # one WordPiece word outside MiniLM's vocabulary: [UNK] alone
PIPELINE_LOGGER = "pairzoo.pipelines.pipeline_conditional_similarity"


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def _write(root: Path, files: "dict[str, str | bytes]") -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def _raises_and_writes_nothing(root: Path, call: Callable[[], object], error: type, match: str) -> None:
    before = _snapshot(root)
    with pytest.raises(error, match=match):
        call()
    assert _snapshot(root) == before, "a failing call must leave the disk as it found it"


def _write_csts(path: Path, rows: list, columns: tuple = CSTS_COLUMNS) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        writer.writerows(rows)
    return path


def _csts_rows(n: int, condition: str = "The activity.") -> list:
    return [[f"A man walks {i}.", f"A man runs {i}.", condition, str(1 + i % 5)] for i in range(n)]


def _stsb_rows(n: int) -> str:
    return "".join(f"{i}\tg\tf\t2012\t{i}\ts\ts\tA man walks {i}.\tA man runs.\t{i % 5}.0\n" for i in range(n))


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny-bert")


@pytest.fixture(scope="module")
def cross_encoder():
    return create_model("cross-encoder", backbone="tiny-bert").eval()


@pytest.fixture(scope="module")
def scorer(cross_encoder, tokenizer):
    return pipeline("conditional-similarity", model=cross_encoder, tokenizer=tokenizer)


@pytest.fixture(scope="module")
def pair_scorer(cross_encoder, tokenizer):
    return pipeline("pair-similarity", model=cross_encoder, tokenizer=tokenizer)


# ============================================================================ duplicate column names


def test_csts_header_naming_label_twice_is_refused(tmp_path):
    path = _write_csts(
        tmp_path / "dup.csv",
        [["A man walks.", "A man runs.", "The activity.", "4", "1"]],
        ("sentence1", "sentence2", "condition", "label", "label"),
    )
    _raises_and_writes_nothing(tmp_path, lambda: load_csts(path), ValueError, r"dup.csv' names column 'label' 2 times")
    folder = tmp_path / "csts"
    _write_csts(folder / "csts_train.csv", _csts_rows(4))
    _write_csts(
        folder / "csts_validation.csv",
        [[*row, "1"] for row in _csts_rows(4)],
        ("sentence1", "sentence2", "condition", "label", "label"),
    )
    _raises_and_writes_nothing(
        tmp_path,
        lambda: load_dataset("csts", csts_path=folder),
        ValueError,
        "csts_validation.csv' names column 'label'",
    )


@pytest.mark.parametrize(
    "dataset, rel, content",
    [
        ("stsb", "STS-B/dev.tsv",
         STSB_HEADER.replace("\tscore\n", "\tscore\tscore\n") + "0\tg\tf\t2012\t0\ts\ts\tA.\tB.\t3\t1\n"),
        ("rte", "RTE/dev.tsv", "index\tsentence1\tsentence1\tlabel\n0\tA.\tB.\tentailment\n"),
        ("sick-r", "SICK/SICK.txt", SICK_HEADER.replace("sentence_B_dataset", "sentence_A") + "\t".join(
            ["1", "A.", "B.", "NEUTRAL", "3.5", "x", "x", "x", "x", "x", "x", "TRIAL"]) + "\n"),
    ],
)  # fmt: skip
def test_tsv_header_naming_a_column_twice_is_refused(tmp_path, dataset, rel, content):
    _write(tmp_path, {f"data/{rel}": content})
    column = {"stsb": "score", "rte": "sentence1", "sick-r": "sentence_A"}[dataset]
    _raises_and_writes_nothing(
        tmp_path,
        lambda: load_dataset(dataset, data_dir=tmp_path / "data", split="validation"),
        ValueError,
        f"{Path(rel).name}' names column '{column}' 2 times",
    )


# ============================================================================ every loader x every broken file

# data set -> (file of its validation split, header, row with `{s1}` and `{label}`, a good label, bad labels, a column
# the reader needs)
GLUE = {
    "stsb": ("STS-B/dev.tsv", STSB_HEADER, "0\tg\tf\t2012\t0\ts\ts\t{s1}\tB.\t{label}\n", "3.5", ["7.5", "nan", "-1"],
             "score"),
    "mrpc": ("MRPC/dev.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n", "{label}\t1\t2\t{s1}\tB.\n", "1",
             ["2", "nan", ""], "#1 String"),
    "rte": ("RTE/dev.tsv", "index\tsentence1\tsentence2\tlabel\n", "0\t{s1}\tB.\t{label}\n", "entailment",
            ["maybe", "nan"], "label"),
    "qnli": ("QNLI/dev.tsv", "index\tquestion\tsentence\tlabel\n", "0\t{s1}\tB.\t{label}\n", "entailment",
             ["maybe", "NaN"], "question"),
    "sick-r": ("SICK/SICK.txt", SICK_HEADER, "1\t{s1}\tB.\tNEUTRAL\t{label}\tx\tx\tx\tx\tx\tx\tTRIAL\n", "3.5",
               ["0.5", "nan", "6"], "relatedness_score"),
    "sick-e": ("SICK/SICK.txt", SICK_HEADER, "1\t{s1}\tB.\t{label}\t3.5\tx\tx\tx\tx\tx\tx\tTRIAL\n", "NEUTRAL",
               ["MAYBE", "nan"], "SemEval_set"),
    "quora": ("Quora_BiMPM_partition/re2_format/dev.txt", "", "{s1}\tB.\t{label}\n", "1", ["2", "nan"], None),
    "scitail": ("SciTail/re2_format/dev.txt", "", "{s1}\tB.\t{label}\n", "0", ["5", "nan"], None),
}  # fmt: skip


def _glue_cases() -> list:
    cases = []
    for name, (rel, header, row, good, bad_labels, column) in GLUE.items():
        file = Path(rel).name
        two_rows = row.format(s1="A man walks.", label=good) + row.format(s1="A dog runs.", label=good)
        no_rows = f"(no rows in .*{file}'|{file}' has 0 row)"
        cases += [
            (name, "non-utf8", header.encode() + b"0\t\xff\xfe\tB.\t1\n", f"{file}' is not valid UTF-8"),
            (name, "invisible-text", header + two_rows + row.format(s1="\u200b\u200d", label=good), "`.*` is empty"),
            *((name, f"label-{label or 'empty'}", header + two_rows + row.format(s1="A.", label=label),
               f"{file}' (row|line) \\d+: label") for label in bad_labels),
        ]  # fmt: skip
        if header:
            renamed = header.replace(f"\t{column}\t", "\trenamed\t").replace(f"{column}\t", "renamed\t", 1)
            renamed = renamed.replace(f"\t{column}\n", "\trenamed\n")
            cases += [
                (name, "empty-file", b"", f"{file}' is empty"),
                (name, "header-only", header, no_rows),
                (name, "missing-column", renamed + two_rows, f"{file}' has no column '{column}'"),
            ]
        else:
            cases.append((name, "empty-file", b"", no_rows))
    return cases


@pytest.mark.parametrize("name, defect, content, match", _glue_cases(), ids=[f"{c[0]}-{c[1]}" for c in _glue_cases()])
def test_every_tsv_loader_refuses_a_broken_file_naming_it(tmp_path, name, defect, content, match):
    _write(tmp_path, {f"data/{GLUE[name][0]}": content})
    _raises_and_writes_nothing(
        tmp_path, lambda: load_dataset(name, data_dir=tmp_path / "data", split="validation"), ValueError, match
    )


SNLI_FILES = ("labels", "s1", "s2", "preproc1_expl_1", "preproc1_expl_2", "preproc1_expl_3")


@pytest.mark.parametrize(
    "defect, files, match",
    [
        ("empty", dict.fromkeys(SNLI_FILES, ""), "labels.dev'"),
        ("non-utf8", {**dict.fromkeys(SNLI_FILES, "x\n"), "labels": b"\xff\n"}, "labels.dev' is not valid UTF-8"),
        ("unknown-label", {**dict.fromkeys(SNLI_FILES, "A.\n"), "labels": "maybe\n"},
         "labels.dev' row 1: label 'maybe'"),
        ("nan-label", {**dict.fromkeys(SNLI_FILES, "A.\n"), "labels": "nan\n"}, "labels.dev' row 1: label 'nan'"),
        ("invisible-text", {**dict.fromkeys(SNLI_FILES, "A.\n"), "labels": "neutral\n", "s2": "\u200b\n"},
         r"s2.dev' row 1: `s2.dev` is empty"),
    ],
)  # fmt: skip
def test_snli_refuses_a_broken_file_naming_it(tmp_path, defect, files, match):
    _write(tmp_path, {f"data/e-SNLI/{stem}.dev": content for stem, content in files.items()})
    _raises_and_writes_nothing(
        tmp_path, lambda: load_dataset("snli", data_dir=tmp_path / "data", split="validation"), ValueError, match
    )


def _absa(polarity: str = "positive", term: str = "battery") -> str:
    return (
        '<sentences><sentence id="1"><text>The battery is great.</text><aspectTerms>'
        f'<aspectTerm term="{term}" polarity="{polarity}" from="4" to="11"/></aspectTerms></sentence></sentences>'
    )


@pytest.mark.parametrize(
    "defect, content, match",
    [
        ("empty", b"", "Laptop_Train_v2.xml' is not valid XML"),
        ("non-utf8", b"<sentences><sentence><text>caf\xe9</text></sentence></sentences>", "is not valid XML"),
        ("no-terms", "<sentences></sentences>", "has no aspect terms"),
        ("unknown-polarity", _absa("great"), "row 1: label 'great' is not one of"),
        ("nan-polarity", _absa("nan"), "row 1: label 'nan' is not one of"),
        ("invisible-term", _absa(term="\u200b"), "row 1: `aspectTerm term` is empty"),
    ],
)
def test_absa_refuses_a_broken_file_naming_it(tmp_path, defect, content, match):
    _write(tmp_path, {"data/SemEval2014_ABSA/Laptop_Train_v2.xml": content})
    _raises_and_writes_nothing(
        tmp_path, lambda: load_dataset("absa-laptops", data_dir=tmp_path / "data"), ValueError, match
    )


@pytest.mark.parametrize(
    "defect, content, match",
    [
        ("empty", "", "bad.csv' is missing columns"),
        ("header-only", ",".join(CSTS_COLUMNS) + "\n", "bad.csv' has no rows"),
        ("missing-column", "sentence1,sentence2,label\nA.,B.,3\n", r"bad.csv' is missing columns \['condition'\]"),
        ("non-utf8", b"sentence1,sentence2,condition,label\ncaf\xe9,B.,C.,3\n", "bad.csv' is not valid UTF-8"),
        ("label-out-of-range", "sentence1,sentence2,condition,label\nA.,B.,C.,0.5\n", r"row 2: label 0.5 is outside"),
        ("label-nan", "sentence1,sentence2,condition,label\nA.,B.,C.,nan\n", "row 2: label nan is outside"),
        ("label-inf", "sentence1,sentence2,condition,label\nA.,B.,C.,inf\n", "row 2: label inf is outside"),
        ("invisible-condition", "sentence1,sentence2,condition,label\nA.,B.,\u200b\u2060,3\n",
         "row 2: `condition` is empty"),
    ],
)  # fmt: skip
def test_csts_refuses_a_broken_file_naming_it(tmp_path, defect, content, match):
    _write(tmp_path, {"bad.csv": content.encode() if isinstance(content, str) else content})
    _raises_and_writes_nothing(tmp_path, lambda: load_csts(tmp_path / "bad.csv"), ValueError, match)


# ============================================================================ --csts_path given one file


def test_one_csts_file_is_refused_for_training_and_read_as_a_named_split(tmp_path):
    path = _write_csts(tmp_path / "all.csv", _csts_rows(6))
    _raises_and_writes_nothing(
        tmp_path,
        lambda: load_dataset("csts", csts_path=path),
        ValueError,
        r"`csts_path` \(--csts_path\) .*all.csv' is one file; training needs the folder .*csts_validation.csv",
    )
    argv = ["--output_dir", str(tmp_path / "run"), *TINY, "--dataset", "csts", "--csts_path", str(path)]
    _raises_and_writes_nothing(tmp_path, lambda: train_main(argv), ValueError, "--csts_path")
    assert load_dataset("csts", csts_path=path, split="validation")["validation"].num_rows == 6
    unlabelled = _write_csts(tmp_path / "test.csv", [[*row[:3], ""] for row in _csts_rows(2)])
    assert all(math.isnan(x) for x in load_dataset("csts", csts_path=unlabelled, split="test")["test"]["label"])


def test_readme_says_what_csts_path_accepts():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert "or one file)" not in readme
    assert "one file is refused" in readme


# ============================================================================ texts of only unknown tokens


def _warnings(caplog, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger and r.levelno == logging.WARNING]


@pytest.mark.parametrize("batch_size", [1, 4])
def test_conditional_pipeline_warns_once_per_call_naming_the_unknown_only_field(scorer, caplog, batch_size):
    inputs = [{**OK, "condition": EMOJI}, OK, {**OK, "condition": EMOJI, "sentence1": EMOJI}]
    with caplog.at_level(logging.WARNING, logger=PIPELINE_LOGGER):
        results = scorer(inputs, batch_size=batch_size)
    assert len(results) == 3 and all(math.isfinite(r["score"]) for r in results)
    messages = _warnings(caplog, PIPELINE_LOGGER)
    assert len(messages) == 1, messages
    assert "`sentence1` of 1 of 3 input(s), `condition` of 2 of 3 input(s)" in messages[0]
    assert "[UNK]" in messages[0] and "sentence2" not in messages[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=PIPELINE_LOGGER):
        scorer({**OK, "sentence2": f"{EMOJI} {EMOJI}"})
        scorer([OK, {**OK, "sentence1": "Fine \U0001f600 words."}], batch_size=batch_size)  # some words are read
    messages = _warnings(caplog, PIPELINE_LOGGER)
    assert len(messages) == 1 and "`sentence2` of 1 of 1 input(s)" in messages[0], messages


@pytest.mark.parametrize(
    "name, overrides",
    [
        ("cross-encoder", {}),
        ("comateformer", {"combined_layers": [0, 1], "combined_head_fraction": [0.5, 0.3]}),
        ("siamese-matcher", {"hidden_size": 64, "max_sequence_length": 32, "sfa_reductions": [2, 2]}),
        ("neighbor-attention", {"neighbor_layers": [0], "num_candidates": 20, "num_neighbors": 4, "num_labels": 3}),
    ],
)
def test_pair_pipeline_names_the_unknown_only_field_for_every_input_format(tokenizer, caplog, name, overrides):
    model = create_model(name, backbone="tiny-bert", **overrides).eval()
    pair = pipeline("pair-similarity", model=model, tokenizer=tokenizer)
    with caplog.at_level(logging.WARNING, logger=PIPELINE_LOGGER):
        pair([PAIR_OK, {**PAIR_OK, "text_pair": EMOJI}], batch_size=2)
    messages = _warnings(caplog, PIPELINE_LOGGER)
    assert len(messages) == 1 and "`text_pair` of 1 of 2 input(s)" in messages[0] and "`text` " not in messages[0]


def test_unknown_only_segments_reads_roberta_pairs_and_skips_tokenizers_without_unknowns(tokenizer):
    bert = encode_pair_inputs(tokenizer, ["A man.", EMOJI], [EMOJI, "A dog."])
    flags = unknown_only_segments(tokenizer, bert["input_ids"], bert["attention_mask"], 2)
    assert flags.tolist() == [[False, True], [True, False]]
    roberta = load_tokenizer("tiny-roberta")  # `<s> a </s></s> b </s>`: byte-level, never unknown
    encoded = encode_pair_inputs(roberta, ["A man.", EMOJI], [EMOJI, "A dog."])
    assert not unknown_only_segments(roberta, encoded["input_ids"], encoded["attention_mask"], 2).any()


def _dataset(rows: list[dict], label_names: "list[str] | None" = None) -> Dataset:
    label = ClassLabel(names=label_names) if label_names else Value("float32")
    features = Features({**{key: Value("string") for key in rows[0] if key != "label"}, "label": label})
    return Dataset.from_list(rows, features=features)


def test_training_data_with_unknown_only_rows_is_a_warning_naming_dataset_field_and_rows(
    cross_encoder, tokenizer, caplog
):
    rows = [{**OK, "label": 3.0}, {**OK, "sentence2": EMOJI, "label": 2.0}, {**OK, "sentence2": EMOJI, "label": 1.0}]
    collator = make_collator(cross_encoder, tokenizer, 64, (1.0, 5.0))
    with caplog.at_level(logging.WARNING, logger="pairzoo.training.collators"):
        check_training_data(cross_encoder, collator, {"train": _dataset(rows), "validation": _dataset(rows[:1])}, "x")
    messages = _warnings(caplog, "pairzoo.training.collators")
    assert len(messages) == 1, messages
    assert "dataset 'x', train split: `sentence2` of 2 of 3 rows encodes to only the unknown token" in messages[0]
    assert "e.g. row 1" in messages[0]


def test_training_run_warns_about_unknown_only_rows_of_a_csts_file(tmp_path, caplog):
    folder = tmp_path / "csts"
    _write_csts(folder / "csts_train.csv", [*_csts_rows(5), ["A man walks.", EMOJI, "The activity.", "2"]])
    _write_csts(folder / "csts_validation.csv", _csts_rows(4))
    argv = ["--output_dir", str(tmp_path / "run"), *TINY, "--dataset", "csts", "--csts_path", str(folder),
            "--max_length", "32", "--no_export"]  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="pairzoo.training.collators"):
        train_main(argv)
    messages = _warnings(caplog, "pairzoo.training.collators")
    assert any("dataset 'csts', train split: `sentence2` of 1 of 6 rows" in m and "row 5" in m for m in messages)


# ============================================================================ max_length and the backbone's limit


@pytest.mark.parametrize("max_length", ["513", "100000"])
def test_train_refuses_max_length_above_the_backbone_limit(tmp_path, max_length):
    argv = ["--output_dir", str(tmp_path / "run"), *TINY, "--synthetic_train_size", "8",
            "--synthetic_validation_size", "4", "--max_length", max_length]  # fmt: skip
    _raises_and_writes_nothing(
        tmp_path,
        lambda: train_main(argv),
        ValueError,
        rf"`--max_length` is {max_length}, above the backbone's limit of 512",
    )


@pytest.mark.parametrize("max_length", [513, 600, 100_001])
def test_both_pipelines_refuse_max_length_above_the_backbone_limit(
    scorer, pair_scorer, cross_encoder, tokenizer, max_length
):
    long_example = {**OK, "sentence1": "word " * 700}
    for call in (
        lambda: scorer(long_example, max_length=max_length),
        lambda: scorer([long_example, OK], max_length=max_length, batch_size=2),
        lambda: pair_scorer({**PAIR_OK, "text": "word " * 700}, max_length=max_length),
        lambda: pipeline("pair-similarity", model=cross_encoder, tokenizer=tokenizer, max_length=max_length),
    ):
        with pytest.raises(ValueError, match=rf"`max_length` is {max_length}, above the backbone's limit of 512"):
            call()
    assert math.isfinite(scorer(long_example, max_length=512)["score"])


def test_pipeline_default_length_is_the_smaller_of_tokenizer_and_backbone_limits(tokenizer):
    spec = get_model_spec("cross-encoder")
    backbone = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=40,
    )
    model = spec.model_class(spec.config_class(backbone_config=backbone)).eval()
    unlimited = load_tokenizer("tiny-bert")
    unlimited.model_max_length = int(1e30)  # a tokenizer that states no limit
    assert default_max_length(unlimited, backbone) == 40 and default_max_length(tokenizer, backbone) == 40
    assert default_max_length(unlimited, None) == 512
    scorer = pipeline("conditional-similarity", model=model, tokenizer=unlimited)
    shapes = []
    forward = scorer._forward
    scorer._forward = lambda batch: shapes.append(tuple(batch["input_ids"].shape)) or forward(batch)
    long_example = {**OK, "sentence1": "word " * 100}
    assert math.isfinite(scorer(long_example)["score"]) and shapes == [(1, 40)]
    with pytest.raises(ValueError, match="`max_length` is 41, above the backbone's limit of 40"):
        scorer(long_example, max_length=41)


def test_pipeline_max_length_given_at_construction_holds_in_batched_calls(cross_encoder, tokenizer):
    scorer = pipeline("conditional-similarity", model=cross_encoder, tokenizer=tokenizer, max_length=16)
    shapes = []
    forward = scorer._forward
    scorer._forward = lambda batch: shapes.append(batch["input_ids"].shape[1]) or forward(batch)
    long_example = {**OK, "sentence1": "word " * 100}
    scorer([long_example, long_example], batch_size=2)
    scorer(long_example)
    assert shapes == [16, 16]


# ============================================================================ --max_length too small for the format


def _stsb_data(tmp_path: Path) -> None:
    _write(tmp_path, {f"data/STS-B/{f}.tsv": STSB_HEADER + _stsb_rows(6) for f in ("train", "dev")})


@pytest.mark.parametrize("max_length", ["1", "4"])
def test_max_length_too_small_for_the_format_is_refused_before_training(tmp_path, max_length):
    _stsb_data(tmp_path)
    argv = ["--output_dir", str(tmp_path / "run"), *TINY, "--dataset", "stsb", "--data_dir", str(tmp_path / "data"),
            "--max_length", max_length]  # fmt: skip
    before = _snapshot(tmp_path)
    with pytest.raises(ValueError, match=rf"`--max_length` {max_length} is too small .* takes 5 tokens") as err:
        train_main(argv)
    assert "condition" not in str(err.value)
    assert _snapshot(tmp_path) == before


def test_a_condition_too_long_for_max_length_names_dataset_split_and_row(tmp_path):
    folder = tmp_path / "csts"
    rows = _csts_rows(5)
    rows[3][2] = "The colour of the clothing worn by the people " * 4
    _write_csts(folder / "csts_train.csv", rows)
    _write_csts(folder / "csts_validation.csv", _csts_rows(4))
    argv = ["--output_dir", str(tmp_path / "run"), *TINY, "--dataset", "csts", "--csts_path", str(folder),
            "--max_length", "24"]  # fmt: skip
    _raises_and_writes_nothing(
        tmp_path,
        lambda: train_main(argv),
        ValueError,
        r"dataset 'csts', train split, row 3: `condition` 'The colour.* has \d+ tokens.*needs `?--max_length`? >= \d+",
    )


def test_encoders_name_max_length_when_no_text_fits(tokenizer):
    with pytest.raises(ValueError, match=r"`max_length`=2 leaves no room for the sentences") as err:
        encode_conditional_inputs(tokenizer, "A man.", "A dog.", max_length=2)
    assert "condition" not in str(err.value)
    with pytest.raises(ValueError, match=r"`max_length`=2 leaves no room for each text.*>= 3"):
        encode_tri_inputs(tokenizer, "A man.", "A dog.", max_length=2)
    with pytest.raises(ValueError, match=r"`max_length`=4 leaves no room for a sentence pair.*>= 5"):
        encode_pair_inputs(tokenizer, "A man.", "A dog.", max_length=4)
    assert encode_pair_inputs(tokenizer, "A man walks.", "A dog.", max_length=5)["input_ids"].shape == (1, 5)
    assert encode_tri_inputs(tokenizer, "A man walks.", max_length=3)["input_ids"].shape == (1, 3)


def test_training_data_rows_are_checked_before_any_batch(cross_encoder, tokenizer):
    collator = make_collator(cross_encoder, tokenizer, 64, (1.0, 5.0))
    cases = [
        ([{**OK, "label": 3.0}, {**OK, "sentence2": None, "label": 3.0}], r"`sentence2`\[1\] must be a string"),
        ([{**OK, "label": 3.0}, {**OK, "condition": "\u200b", "label": 3.0}], r"`condition`\[1\] is empty"),
        ([{**OK, "label": 3.0}, {**OK, "label": float("nan")}], r"`label`\[1\] is not finite"),
        ([{**OK, "label": 3.0}, {**OK, "label": 9.0}], r"`label`\[1\] = 9.0 is outside"),
    ]
    for rows, match in cases:
        with pytest.raises(ValueError, match=rf"dataset 'hub:x', validation split: {match}"):
            check_training_data(
                cross_encoder, collator, {"train": _dataset(rows[:1]), "validation": _dataset(rows)}, "hub:x"
            )


# ============================================================================ --backbone that is no encoder


def _gpt2(folder: Path) -> None:
    GPT2Config(n_layer=1, n_embd=32, n_head=4).save_pretrained(folder)


def _t5(folder: Path) -> None:
    T5Config(d_model=32, num_layers=1, num_heads=4, d_ff=64, d_kv=8).save_pretrained(folder)


def _garbage(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{not json")


def _no_model_type(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"hidden_size": 32}')


def _bert_without_weights(folder: Path) -> None:
    BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64).save_pretrained(
        folder
    )


def _pairzoo_export(folder: Path) -> None:
    export_model(create_model("cross-encoder", backbone="tiny-bert"), load_tokenizer("tiny-bert"), folder)


def _a_file(folder: Path) -> None:
    folder.write_text("not a folder")


BACKBONES = [
    ("gpt2", _gpt2, "is a decoder \\(causal language\\) model \\('gpt2'\\)"),
    ("t5", _t5, "is an encoder-decoder model \\('t5'\\)"),
    ("garbage-config", _garbage, "its config.json does not load.*not a valid JSON"),
    ("no-model-type", _no_model_type, "its config.json does not load.*model_type"),
    ("bert-without-weights", _bert_without_weights, "has no pretrained weights"),
    ("pairzoo-export", _pairzoo_export, "is a pairzoo model \\('cross-encoder'"),
    ("a-file", _a_file, "is a file"),
]


@pytest.mark.parametrize("kind, build, reason", BACKBONES, ids=[b[0] for b in BACKBONES])
def test_backbone_that_is_no_pretrained_encoder_is_one_clear_error(tmp_path, kind, build, reason):
    folder = tmp_path / kind
    build(folder)
    name = str(folder)
    _raises_and_writes_nothing(
        tmp_path, lambda: create_model("cross-encoder", backbone=name), ValueError, f"`backbone` '{name}'.*{reason}"
    )
    if kind != "bert-without-weights":  # a config is all a random model needs
        _raises_and_writes_nothing(tmp_path, lambda: backbone_config(name), ValueError, reason)
        _raises_and_writes_nothing(
            tmp_path, lambda: create_model("cross-encoder", backbone=name, pretrained=False), ValueError, reason
        )
    else:
        assert create_model("cross-encoder", backbone=name, pretrained=False).config.backbone_config.hidden_size == 32


@pytest.mark.parametrize("kind, build, reason", [BACKBONES[0], BACKBONES[4]], ids=["gpt2", "bert-without-weights"])
def test_train_with_a_backbone_that_is_no_pretrained_encoder_writes_nothing(tmp_path, kind, build, reason):
    build(tmp_path / kind)
    argv = ["--output_dir", str(tmp_path / "run"), *TINY, "--synthetic_train_size", "8", "--synthetic_validation_size",
            "4", "--backbone", str(tmp_path / kind)]  # fmt: skip
    _raises_and_writes_nothing(tmp_path, lambda: train_main(argv), ValueError, f"`backbone` .*{reason}")


def test_backbone_folder_without_tokenizer_files_names_the_backbone(tmp_path, cross_encoder):
    folder = tmp_path / "no-tokenizer"
    cross_encoder.backbone.save_pretrained(folder)
    _raises_and_writes_nothing(tmp_path, lambda: load_tokenizer(str(folder)), ValueError, "`backbone` .*tokenizer")


def test_from_backbone_names_a_backbone_that_does_not_load(tmp_path):
    _bert_without_weights(tmp_path / "bert")
    model_class = get_model_spec("cross-encoder").model_class
    with pytest.raises(ValueError, match="`backbone` .*bert' does not load as a pretrained encoder"):
        model_class.from_backbone(str(tmp_path / "bert"))


# ============================================================================ pipeline inputs


@pytest.mark.parametrize("label", [3.0, "3.0", 2, None, [1, 2], {"a": 1}])
def test_a_label_key_is_ignored_whatever_its_type(scorer, pair_scorer, label):
    assert scorer({**OK, "label": label}) == scorer(OK)
    assert pair_scorer({**PAIR_OK, "label": label}) == pair_scorer(PAIR_OK)
    assert scorer([{**OK, "label": label}, OK], batch_size=2) == scorer([OK, OK], batch_size=2)


BAD_PIPELINE_INPUTS = [
    ("empty-sentence1", {**OK, "sentence1": ""}, r"`sentence1`\[0\] is empty"),
    ("invisible-sentence2", {**OK, "sentence2": "\u200b"}, r"`sentence2`\[0\] is empty"),
    ("none-sentence1", {**OK, "sentence1": None}, "missing `sentence1`"),
    ("int-condition", {**OK, "condition": 3}, "`condition` must be a string, got int"),
    ("bytes-sentence1", {**OK, "sentence1": b"A man."}, "`sentence1` must be a string, got bytes"),
    ("empty-dict", {}, "missing `sentence1`"),
    ("none", None, "must be dicts with .*got NoneType"),
    ("unknown-key", {**OK, "score": 3.0}, r"unknown fields \['score'\]"),
    ("pair-keys", PAIR_OK, "missing `sentence1`"),
]


@pytest.mark.parametrize("case, example, match", BAD_PIPELINE_INPUTS, ids=[c[0] for c in BAD_PIPELINE_INPUTS])
def test_bad_pipeline_input_is_refused_alone_and_in_a_list_naming_its_position(scorer, case, example, match):
    with pytest.raises(ValueError, match=match):
        scorer(example)
    for batch_size in (1, 3):
        with pytest.raises(ValueError, match=f"input 1 of 3: .*{match}"):
            scorer([OK, example, OK], batch_size=batch_size)


@pytest.mark.parametrize(
    "inputs, match",
    [
        ([PAIR_OK, {"sentence1": "A.", "condition": "B."}], r"input 1 of 2: Input is missing `text`"),
        ([PAIR_OK, [PAIR_OK]], "input 1 of 2: pair-similarity inputs must be dicts .*got list"),
        ([PAIR_OK, "A man."], "input 1 of 2: pair-similarity inputs must be dicts .*got str"),
        ([PAIR_OK, {**PAIR_OK, "text_pair": "  "}], r"input 1 of 2: `text_pair`\[0\] is empty"),
        ([], "empty list"),
    ],
)
def test_pair_pipeline_refuses_mixed_lists_naming_the_input(pair_scorer, inputs, match):
    for batch_size in (1, 2):
        with pytest.raises(ValueError, match=match):
            pair_scorer(inputs, batch_size=batch_size)


def test_a_tuple_of_inputs_scores_as_a_list_whatever_the_batch_size(scorer):
    expected = scorer([OK, {**OK, "condition": "The place."}])
    for batch_size in (1, 2):
        got = scorer((OK, {**OK, "condition": "The place."}), batch_size=batch_size)
        assert [r["score"] for r in got] == pytest.approx([r["score"] for r in expected], abs=1e-5)


def test_pipeline_inputs_the_model_reads_whole_score_the_same_as_a_plain_call(scorer, cross_encoder, tokenizer):
    example = {**OK, "sentence1": "Caf\u00e9 \u00fcber na\u00efve."}
    with torch.no_grad():
        direct = cross_encoder(
            **encode_conditional_inputs(tokenizer, example["sentence1"], OK["sentence2"], OK["condition"])
        )
    assert scorer(example)["score"] == pytest.approx(float(direct.scores[0]), abs=1e-6)
