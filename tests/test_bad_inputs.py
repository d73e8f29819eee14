"""Bad input at every public entry point: one table, one contract.

The contract (also in docs/errors.md): a bad input raises, before anything is written, an exception of the type in
the table whose message names the offending field, flag or file:

- `ValueError`: a bad value (empty or whitespace-only text, a non-string or mistyped field, mismatched lengths, a
  condition too long to fit, a label outside its range or NaN, an unknown model/backbone/dataset/split name, a
  malformed CSV/TSV/XML row, non-UTF-8 bytes, pickle weights, corrupt weights, a tampered config);
- `FileNotFoundError`: a missing folder or file (data folder, split file, export folder, weights, checkpoint);
- `FileExistsError`: an export over an existing folder without `overwrite=True`;
- `KeyError`: a collator row without a required column (the message is the column name).

Each case runs its setup, snapshots `tmp_path` (every file, its size and mtime), runs the bad call and checks both
the exception and that the snapshot is unchanged: nothing written, nothing half-written, nothing removed.
"""

import json
import math
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import BertModel, pipeline

from pairzoo import create_model, encode_conditional_inputs, load_tokenizer
from pairzoo.hub_cards.export import export_model, load_export, verify_export
from pairzoo.pipelines.pipeline_conditional_similarity import encode_bi_inputs, encode_tri_inputs
from pairzoo.training.cli import main as train_main
from pairzoo.training.collators import ConditionalPairCollator, SentencePairCollator, make_collator
from pairzoo.training.data import load_csts, load_dataset, load_kg_entities

TINY = ["--backbone", "tiny-bert", "--num_train_epochs", "1", "--per_device_train_batch_size", "4",
        "--synthetic_train_size", "8", "--synthetic_validation_size", "4", "--eval_strategy", "no",
        "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true"]  # fmt: skip
STSB_HEADER = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
CSTS_HEADER = "sentence1,sentence2,condition,label\n"
OK = {"sentence1": "A man walks.", "sentence2": "A man runs.", "condition": "The activity."}


@dataclass
class Ctx:
    """What a case's setup may use: a scratch folder, a tokenizer, a tiny model, its scorer and export."""

    tmp: Path
    tokenizer: object
    model: object
    scorer: object
    export: Path

    def write(self, rel: str, content: "str | bytes") -> Path:
        path = self.tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path

    def export_copy(self) -> Path:
        folder = self.tmp / "export"
        shutil.copytree(self.export, folder)
        return folder

    def tamper_config(self, **changes) -> Path:
        folder = self.export_copy()
        config = json.loads((folder / "config.json").read_text())
        for key, value in changes.items():
            if key.startswith("backbone."):
                config["backbone_config"][key.split(".", 1)[1]] = value
            else:
                config[key] = value
        (folder / "config.json").write_text(json.dumps(config))
        return folder


@dataclass
class Case:
    """`setup(ctx)` prepares files and returns the bad call; it must raise `error` matching `match`."""

    id: str
    setup: Callable[[Ctx], Callable[[], object]]
    error: type
    match: str


def _cli(*args: str) -> Callable[[Ctx], Callable[[], object]]:
    return lambda c: lambda: train_main(["--output_dir", str(c.tmp / "run"), *TINY, *args])


def _stsb(rows: str, header: str = STSB_HEADER) -> Callable[[Ctx], Callable[[], object]]:
    def setup(c: Ctx):
        c.write("data/STS-B/dev.tsv", header + rows)
        return lambda: load_dataset("stsb", data_dir=c.tmp / "data", split="validation")

    return setup


def _csts(content: "str | bytes") -> Callable[[Ctx], Callable[[], object]]:
    def setup(c: Ctx):
        path = c.write("csts/bad.csv", content)
        return lambda: load_csts(path)

    return setup


def _row(label=3.0, **fields) -> dict:
    return {**OK, "label": label, **fields}


def _call(fn: Callable[[Ctx], object]) -> Callable[[Ctx], Callable[[], object]]:
    """A case with no files to prepare: the bad call is `fn(ctx)`."""
    return lambda c: lambda: fn(c)


def _checking_values(fn: Callable[[Ctx], object]) -> Callable[[Ctx], Callable[[], object]]:
    """A bad model call `fn(ctx)` under `PAIRZOO_CHECK_INPUTS=1`, the debug option that runs the value checks of
    collators and pipelines on every forward pass (without it, a forward reads no tensor value)."""

    def call(c: Ctx):
        with mock.patch.dict(os.environ, {"PAIRZOO_CHECK_INPUTS": "1"}):
            return fn(c)

    return _call(call)


def _added_token_scorer(c: Ctx):
    """A pipeline whose tokenizer has a token the model's vocabulary lacks (added after the model was built)."""
    tokenizer = load_tokenizer("tiny-bert")
    tokenizer.add_tokens(["zyxwvut"])
    scorer = pipeline("conditional-similarity", model=c.model, tokenizer=tokenizer)
    return lambda: scorer({**OK, "condition": "The zyxwvut."})


def _files(files: dict, fn: Callable[[Ctx], object]) -> Callable[[Ctx], Callable[[], object]]:
    """Write `files` (path under tmp -> text or bytes), then the bad call is `fn(ctx)`."""

    def setup(c: Ctx):
        for rel, content in files.items():
            c.write(rel, content)
        return lambda: fn(c)

    return setup


def _data(name: str, split: "str | None" = None) -> Callable[[Ctx], object]:
    return lambda c: load_dataset(name, data_dir=c.tmp / "data", split=split)


def _on_export(prepare: Callable[[Path], object], call: Callable = load_export):
    """Copy the shared export, damage it with `prepare(folder)`, then the bad call is `call(folder)`."""

    def setup(c: Ctx):
        folder = c.export_copy()
        prepare(folder)
        return lambda: call(folder)

    return setup


def _tampered(**changes):
    def setup(c: Ctx):
        folder = c.tamper_config(**changes)
        return lambda: load_export(folder)

    return setup


def _collate(rows: list, num_labels: int = 1, collator=ConditionalPairCollator):
    def setup(c: Ctx):
        label_range = (1.0, 5.0) if num_labels == 1 else None
        return lambda: collator(c.tokenizer, 32, num_labels, label_range)(rows)

    return setup


def _nan_weights(folder: Path) -> None:
    tensors = load_file(folder / "model.safetensors")
    name = sorted(tensors)[0]
    tensors[name] = torch.full_like(tensors[name], float("nan"))
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


def _damage(name: str, data: "Callable[[bytes], bytes] | None" = None) -> Callable[[Path], None]:
    """Delete `name` from an export folder, or replace its bytes by `data(old bytes)`."""

    def prepare(folder: Path) -> None:
        if data is None:
            (folder / name).unlink()
        else:
            (folder / name).write_bytes(data((folder / name).read_bytes()))

    return prepare


def _incomplete_checkpoint(c: Ctx):
    checkpoint = c.tmp / "run" / "checkpoint-3"
    checkpoint.mkdir(parents=True)
    (checkpoint / "model.safetensors").write_bytes(b"\0" * 10)  # what a kill while saving leaves
    return lambda: train_main(["--output_dir", str(c.tmp / "run"), *TINY, "--resume_from_checkpoint", str(checkpoint)])


def _export_over_existing(c: Ctx):
    folder = c.export_copy()
    return lambda: export_model(c.model, c.tokenizer, folder)


LONG = "word " * 60
STSB_ROW = "0\tg\tf\t2012\t0\ts\ts\t{s1}\tB.\t{label}\n"
SNLI_MISALIGNED = {
    "data/e-SNLI/labels.dev": "neutral\nentailment\n",
    "data/e-SNLI/s1.dev": "A.\nB.\n",
    "data/e-SNLI/s2.dev": "C.\n",
    **{f"data/e-SNLI/preproc1_expl_{k}.dev": "x\ny\n" for k in (1, 2, 3)},
}
ABSA_EMPTY_TERM = (
    '<sentences><sentence id="1"><text>The battery is great.</text><aspectTerms>'
    '<aspectTerm term=" " polarity="positive" from="4" to="11"/></aspectTerms></sentence></sentences>'
)
WN18RR_UNKNOWN_ENTITY = {
    "data/WN18RR/entity2text.txt": "e1\tdog, an animal\n",
    "data/WN18RR/relation2text.txt": "_hypernym\thypernym\n",
    "data/WN18RR/dev.tsv": "e1\t_hypernym\te2\n",
}

CASES = [
    # ---------------------------------------------------------------- processors (tokenisation)
    Case("proc-empty-sentence1", _call(lambda c: encode_conditional_inputs(c.tokenizer, "", "b", "c")),
         ValueError, r"`sentence1`\[0\] is empty"),
    Case("proc-whitespace-sentence2", _call(lambda c: encode_conditional_inputs(c.tokenizer, "a", " \t\n", "c")),
         ValueError, r"`sentence2`\[0\] is empty"),
    Case("proc-unicode-space-condition",
         _call(lambda c: encode_conditional_inputs(c.tokenizer, "a", "b", "\u3000\u00a0\u2003")),
         ValueError, r"`condition`\[0\] is empty"),
    Case("proc-none-sentence1", _call(lambda c: encode_conditional_inputs(c.tokenizer, None, "b", "c")),
         ValueError, "`sentence1` is required"),
    Case("proc-int-sentence1", _call(lambda c: encode_conditional_inputs(c.tokenizer, 42, "b", "c")),
         ValueError, "`sentence1` must be a string or a list of strings, got int"),
    Case("proc-bytes-sentence2", _call(lambda c: encode_conditional_inputs(c.tokenizer, "a", b"b", "c")),
         ValueError, "`sentence2` must be a string or a list of strings, got bytes"),
    Case("proc-set-sentence1", _call(lambda c: encode_conditional_inputs(c.tokenizer, {"a", "b"})),
         ValueError, "`sentence1` must be a string or a list of strings, got set"),
    Case("proc-dict-sentence1", _call(lambda c: encode_tri_inputs(c.tokenizer, {"a": 1}, "b", "c")),
         ValueError, "`sentence1` must be a string or a list of strings, got dict"),
    Case("proc-none-in-list-condition",
         _call(lambda c: encode_conditional_inputs(c.tokenizer, ["a", "b"], ["c", "d"], ["e", None])),
         ValueError, r"`condition`\[1\] must be a string, got NoneType"),
    Case("proc-float-in-list-sentence2", _call(lambda c: encode_tri_inputs(c.tokenizer, ["a"], [1.5], None)),
         ValueError, r"`sentence2`\[0\] must be a string, got float"),
    Case("proc-mismatched-sentence2",
         _call(lambda c: encode_conditional_inputs(c.tokenizer, ["a", "b"], ["c"], ["d", "e"])),
         ValueError, "`sentence2` has 1 items but `sentence1` has 2"),
    Case("proc-mismatched-condition", _call(lambda c: encode_bi_inputs(c.tokenizer, ["a"], ["b"], ["c", "d", "e"])),
         ValueError, "`condition` has 3 items but `sentence1` has 1"),
    Case("proc-empty-list", _call(lambda c: encode_conditional_inputs(c.tokenizer, [], [], [])),
         ValueError, "`sentence1` is empty"),
    Case("proc-condition-too-long",
         _call(lambda c: encode_conditional_inputs(c.tokenizer, "a b", "c d", LONG, max_length=32)),
         ValueError, r"`condition`\[0\] has \d+ tokens and cannot fit in max_length=32"),
    Case("proc-bi-condition-too-long", _call(lambda c: encode_bi_inputs(c.tokenizer, "a", "b", LONG, max_length=16)),
         ValueError, r"`condition`\[0\] has \d+ tokens and cannot fit"),
    Case("proc-bi-missing-condition", _call(lambda c: encode_bi_inputs(c.tokenizer, "a", "b", None)),
         ValueError, "`condition` is required"),
    Case("proc-lone-surrogate", _call(lambda c: encode_conditional_inputs(c.tokenizer, "a\ud800b", "b", "c")),
         ValueError, r"`sentence1`\[0\] is not valid Unicode"),
    Case("proc-max-length-zero", _call(lambda c: encode_conditional_inputs(c.tokenizer, "a", "b", "c", max_length=0)),
         ValueError, "`max_length` must be a positive integer"),
    Case("proc-max-length-string", _call(lambda c: encode_tri_inputs(c.tokenizer, "a", "b", "c", max_length="64")),
         ValueError, "`max_length` must be a positive integer"),
    # ---------------------------------------------------------------- collators (training batches)
    Case("collate-nan-label", _collate([_row(float("nan"))]), ValueError, r"`label`\[0\] is not finite"),
    Case("collate-label-outside", _collate([_row(), _row(9.0)]), ValueError, r"`label`\[1\] = 9.0 is outside"),
    Case("collate-none-label", _collate([_row(None)]), ValueError, r"`label`\[0\] must be a number"),
    Case("collate-class-out-of-range", _collate([_row(3)], num_labels=3), ValueError, "not a class index in"),
    Case("collate-empty-batch", _collate([]), ValueError, "empty batch"),
    Case("collate-missing-column", _collate([{"sentence2": "b", "condition": "c", "label": 2.0}]), KeyError,
         "sentence1"),
    Case("collate-pair-empty-sentence2", _collate([_row(sentence2="  ")], collator=SentencePairCollator),
         ValueError, r"`sentence2`\[0\] is empty"),
    Case("collate-tokenized-ids-outside-vocabulary",
         _call(lambda c: make_collator(c.model, c.tokenizer, 32)(
             [{"input_ids": [101, 10**6, 102], "attention_mask": [1, 1, 1], "labels": 2.0}])),
         ValueError, "`input_ids` holds token ids outside"),
    # ---------------------------------------------------------------- models: build and forward
    Case("model-unknown-name", _call(lambda c: create_model("nope", backbone="tiny-bert")),
         ValueError, "Unknown model 'nope'"),
    Case("model-unknown-backbone", _call(lambda c: create_model("cross-encoder", backbone="nope")),
         ValueError, "Unknown backbone 'nope'"),
    Case("model-backbone-folder-without-config", _call(lambda c: create_model("cross-encoder", backbone=str(c.tmp))),
         ValueError, "has no config.json"),
    Case("model-bad-hyperparameter", _call(lambda c: create_model("cross-encoder", "tiny-bert", pooling="max")),
         ValueError, "`pooling` must be one of"),
    Case("model-label-scale",
         _call(lambda c: create_model("cross-encoder", "tiny-bert", label_min=5.0, label_max=1.0)),
         ValueError, "`label_max`"),
    Case("model-forward-without-input-ids",
         _call(lambda c: c.model(attention_mask=torch.ones(1, 4, dtype=torch.long))),
         ValueError, "input_ids"),
    Case("model-forward-float-ids", _call(lambda c: c.model(input_ids=torch.ones(2, 4))),
         ValueError, "`input_ids` must hold integer token ids"),
    Case("model-forward-ids-outside-vocabulary",
         _checking_values(lambda c: c.model(input_ids=torch.full((2, 4), 10**6))),
         ValueError, "`input_ids` holds token ids outside"),
    Case("model-forward-1d-ids", _call(lambda c: c.model(input_ids=torch.ones(4, dtype=torch.long))),
         ValueError, r"`input_ids` must be \(batch_size, sequence_length\)"),
    Case("model-forward-mask-shape",
         _call(lambda c: c.model(input_ids=torch.ones(2, 4, dtype=torch.long), attention_mask=torch.ones(2, 3))),
         ValueError, "`attention_mask` has shape"),
    Case("model-forward-label-batch",
         _call(lambda c: c.model(input_ids=torch.ones(2, 4, dtype=torch.long), labels=torch.ones(3))),
         ValueError, "`labels` has shape"),
    Case("model-forward-nan-label",
         _checking_values(
             lambda c: c.model(input_ids=torch.ones(2, 4, dtype=torch.long), labels=torch.tensor([1.0, math.nan]))),
         ValueError, "`labels` contains NaN"),
    Case("model-forward-class-label-out-of-range",
         _checking_values(lambda c: create_model("cross-encoder", "tiny-bert", num_labels=3)(
             input_ids=torch.ones(2, 4, dtype=torch.long), labels=torch.tensor([0, 5]))),
         ValueError, r"`labels` must be class indices in \[0, 3\)"),
    Case("tokenizer-empty-backbone", _call(lambda c: load_tokenizer("")), ValueError, "`backbone`"),
    # ---------------------------------------------------------------- the conditional-similarity pipeline
    Case("pipe-string-input", _call(lambda c: c.scorer("just text")), ValueError, "must be dicts"),
    Case("pipe-missing-condition", _call(lambda c: c.scorer({"sentence1": "a", "sentence2": "b"})),
         ValueError, "missing `condition`"),
    Case("pipe-none-condition", _call(lambda c: c.scorer({**OK, "condition": None})),
         ValueError, "missing `condition`"),
    Case("pipe-missing-sentence1", _call(lambda c: c.scorer({"sentence2": "b", "condition": "c"})),
         ValueError, "missing `sentence1`"),
    Case("pipe-int-sentence2", _call(lambda c: c.scorer({**OK, "sentence2": 7})),
         ValueError, "`sentence2` must be a string, got int"),
    Case("pipe-list-in-dict", _call(lambda c: c.scorer({**OK, "sentence1": ["a", "b"]})),
         ValueError, "`sentence1` must be a string, got list"),
    Case("pipe-misspelt-field", _call(lambda c: c.scorer({"sentence1": "a", "sentense2": "b", "condition": "c"})),
         ValueError, r"unknown fields \['sentense2'\]"),
    Case("pipe-empty-condition-in-batch", _call(lambda c: c.scorer([OK, {**OK, "condition": "   "}])),
         ValueError, r"`condition`\[0\] is empty"),
    Case("pipe-negative-max-length", _call(lambda c: c.scorer(OK, max_length=-1)),
         ValueError, "`max_length` must be a positive integer"),
    Case("pipe-token-outside-vocabulary", _added_token_scorer, ValueError, "`input_ids` holds token ids outside"),
    # ---------------------------------------------------------------- `python -m pairzoo.train`
    Case("cli-unknown-model", _cli("--model", "nope"), ValueError, "Unknown model 'nope'"),
    Case("cli-unknown-backbone", _cli("--backbone", "no-such-backbone"), ValueError,
         "Unknown backbone 'no-such-backbone'"),
    Case("cli-unknown-dataset", _cli("--dataset", "imdb"), ValueError, "Unknown dataset 'imdb'"),
    Case("cli-missing-data-dir", _cli("--dataset", "mrpc", "--data_dir", "/nonexistent/pz-data"),
         FileNotFoundError, "/nonexistent/pz-data"),
    Case("cli-overrides-not-json", _cli("--config_overrides", '{"pooling": }'), ValueError,
         "`config_overrides` is not valid JSON"),
    Case("cli-overrides-bad-value", _cli("--config_overrides", '{"pooling": "max"}'), ValueError, "`pooling`"),
    Case("cli-max-length-zero", _cli("--max_length", "0"), ValueError, "`--max_length` must be an integer >= 1"),
    Case("cli-negative-max-train-samples", _cli("--max_train_samples", "-5"), ValueError, "`--max_train_samples`"),
    Case("cli-zero-synthetic-size", _cli("--synthetic_train_size", "0"), ValueError, "`--synthetic_train_size`"),
    Case("cli-unknown-flag", _cli("--no_such_flag", "1"), ValueError, "--no_such_flag"),
    Case("cli-csts-without-path", _cli("--dataset", "csts"), ValueError, "csts_path"),
    Case("cli-knowledge-graph", _cli("--dataset", "wn18rr"), ValueError, "knowledge graph"),
    Case("cli-resume-missing-folder", _cli("--resume_from_checkpoint", "/nonexistent/checkpoint-9"),
         FileNotFoundError, "/nonexistent/checkpoint-9"),
    Case("cli-resume-last-without-checkpoints", _cli("--resume_from_checkpoint", "last"),
         FileNotFoundError, "no complete checkpoint"),
    Case("cli-resume-incomplete-checkpoint", _incomplete_checkpoint, ValueError, "checkpoint-3.*trainer_state.json"),
    # ---------------------------------------------------------------- data loaders
    Case("data-missing-folder", _call(lambda c: load_dataset("mrpc", data_dir=c.tmp / "nowhere")),
         FileNotFoundError, "nowhere"),
    Case("data-folder-is-a-file", _files({"afile": "x"}, lambda c: load_dataset("rte", data_dir=c.tmp / "afile")),
         FileNotFoundError, "afile"),
    Case("data-missing-split-file", _files({"data/MRPC/train.tsv": "x\n"}, _data("mrpc", "validation")),
         FileNotFoundError, "MRPC/dev.tsv"),
    Case("data-held-out-test-split", _files({"data/STS-B/dev.tsv": STSB_HEADER}, _data("stsb", "test")),
         FileNotFoundError, "sts-test.tsv"),
    Case("data-short-tsv-row",
         _files({"data/STS-B/dev.tsv": STSB_HEADER + STSB_ROW.format(s1="A.", label=3) + "1\tg\tf\n"},
                _data("stsb", "validation")),
         ValueError, "dev.tsv' line 3: expected 10"),
    Case("data-label-not-a-number",
         _files({"data/STS-B/dev.tsv": STSB_HEADER + STSB_ROW.format(s1="A.", label="high")},
                _data("stsb", "validation")),
         ValueError, "dev.tsv' row 2: label 'high' is not a number"),
    Case("data-label-outside",
         _files({"data/STS-B/dev.tsv": STSB_HEADER + STSB_ROW.format(s1="A.", label=7.5)},
                _data("stsb", "validation")),
         ValueError, r"dev.tsv' row 2: label 7.5 is outside \[0.0, 5.0\]"),
    Case("data-label-nan",
         _files({"data/STS-B/dev.tsv": STSB_HEADER + STSB_ROW.format(s1="A.", label="nan")},
                _data("stsb", "validation")),
         ValueError, "dev.tsv' row 2: label nan is outside"),
    Case("data-missing-column",
         _files({"data/STS-B/dev.tsv": "index\tsentence1\tsentence2\n0\tA.\tB.\n"}, _data("stsb", "validation")),
         ValueError, "dev.tsv' has no column 'score'"),
    Case("data-empty-sentence",
         _files({"data/STS-B/dev.tsv": STSB_HEADER + STSB_ROW.format(s1="  ", label=3)}, _data("stsb", "validation")),
         ValueError, "dev.tsv' row 2: `sentence1` is empty"),
    Case("data-empty-second-sentence",
         _files({"data/RTE/dev.tsv": "index\tsentence1\tsentence2\tlabel\n0\tA.\t \tentailment\n"},
                _data("rte", "validation")),
         ValueError, "dev.tsv' row 2: `sentence2` is empty"),
    Case("data-empty-aspect-term",
         _files({"data/SemEval2014_ABSA/Laptop_Train_v2.xml": ABSA_EMPTY_TERM}, _data("absa-laptops")),
         ValueError, "Laptop_Train_v2.xml' row 1: `aspectTerm term` is empty"),
    Case("data-non-utf8-tsv",
         _files({"data/STS-B/dev.tsv": STSB_HEADER.encode() + b"0\t\xff\xfe\n"}, _data("stsb", "validation")),
         ValueError, "dev.tsv' is not valid UTF-8"),
    Case("data-oversized-field",
         _files({"data/STS-B/dev.tsv": STSB_HEADER + STSB_ROW.format(s1="a" * 200_000, label=3)},
                _data("stsb", "validation")),
         ValueError, "dev.tsv' is not a readable TSV"),
    Case("data-unknown-class-label",
         _files({"data/RTE/dev.tsv": "index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\tmaybe\n"},
                _data("rte", "validation")),
         ValueError, "dev.tsv' row 2: label 'maybe' is not one of"),
    Case("data-headerless-short-row",
         _files({"data/Quora_BiMPM_partition/re2_format/dev.txt": "A.\tB.\t1\nonly one field\n"}, _data("quora")),
         ValueError, "dev.txt' line 2: expected at least 3"),
    Case("data-sick-short-row", _files({"data/SICK/SICK.txt": "pair_ID\tsentence_A\n1\tA.\n"}, _data("sick-r")),
         ValueError, "SICK.txt' line 2: expected at least 12"),
    Case("data-invalid-xml",
         _files({"data/SemEval2014_ABSA/Laptop_Train_v2.xml": "<sentences><sentence>"}, _data("absa-laptops")),
         ValueError, "Laptop_Train_v2.xml' is not valid XML"),
    Case("data-snli-misaligned", _files(SNLI_MISALIGNED, _data("snli", "validation")), ValueError,
         "e-SNLI.*not line-aligned"),
    Case("data-kg-unknown-entity", _files(WN18RR_UNKNOWN_ENTITY, _data("wn18rr", "validation")), ValueError,
         "dev.tsv' line 1: entity 'e2'"),
    Case("data-kg-entities-missing", _call(lambda c: load_kg_entities(c.tmp)), FileNotFoundError, "entity2text.txt"),
    Case("data-bad-split-name", _call(lambda c: load_dataset("synthetic", split="dev")), ValueError, "`split`"),
    Case("data-none-name", _call(lambda c: load_dataset(None)), ValueError, "`dataset` must be a non-empty string"),
    Case("csts-extra-field", _csts(CSTS_HEADER + "A.,B.,C.,3,surplus\n"), ValueError,
         "bad.csv' row 2: expected 4 comma-separated fields .*got 5"),
    Case("csts-missing-field", _csts(CSTS_HEADER + "A.,B.,C.,3\nA.,B.\n"), ValueError,
         "bad.csv' row 3: expected 4 comma-separated fields .*got 2"),
    Case("csts-unterminated-quote", _csts(CSTS_HEADER + 'A.,"B.,C.,3\nD.,E.,F.,2\n'), ValueError,
         "bad.csv' row 2: expected 4"),
    Case("csts-non-utf8", _csts(CSTS_HEADER.encode() + b"caf\xe9,B.,C.,3\n"), ValueError,
         "bad.csv' is not valid UTF-8"),
    Case("csts-header-only", _csts(CSTS_HEADER), ValueError, "bad.csv' has no rows"),
    Case("csts-empty-file", _csts(""), ValueError, "bad.csv' is missing columns"),
    Case("csts-nan-label", _csts(CSTS_HEADER + "A.,B.,C.,NaN\n"), ValueError, "bad.csv' row 2: label nan is outside"),
    Case("csts-empty-condition", _csts(CSTS_HEADER + "A.,B.,,3\n"), ValueError,
         "bad.csv' row 2: `condition` is empty"),
    Case("csts-missing-condition-column", _csts("sentence1,sentence2,label\nA.,B.,3\n"), ValueError,
         r"bad.csv' is missing columns \['condition'\]"),
    Case("csts-missing-train-file",
         _files({"csts/csts_validation.csv": CSTS_HEADER + "A.,B.,C.,3\n"}, lambda c: load_csts(c.tmp / "csts")),
         FileNotFoundError, "csts_train.csv"),
    # ---------------------------------------------------------------- export and load
    Case("export-folder-missing", _call(lambda c: load_export(c.tmp / "no-export")), FileNotFoundError, "no-export"),
    Case("export-missing-weights", _on_export(_damage("model.safetensors")), FileNotFoundError,
         "missing model.safetensors"),
    Case("export-missing-modeling-code", _on_export(_damage("modeling_cross_encoder.py")), FileNotFoundError,
         "missing modeling_cross_encoder.py"),
    Case("export-missing-tokenizer", _on_export(_damage("tokenizer_config.json")), FileNotFoundError,
         "tokenizer_config.json"),
    Case("export-truncated-weights", _on_export(_damage("model.safetensors", lambda b: b[: len(b) // 2])),
         ValueError, "model.safetensors' is corrupt"),
    Case("export-garbage-weights", _on_export(_damage("model.safetensors", lambda b: b"\0garbage" * 10)),
         ValueError, "model.safetensors' is corrupt"),
    Case("export-nan-weights", _on_export(_nan_weights), ValueError, "model.safetensors' is corrupt.*non-finite"),
    Case("export-pickle-weights", _on_export(lambda f: torch.save({"w": torch.zeros(1)}, f / "pytorch_model.bin")),
         ValueError, r"pickle files \['pytorch_model.bin'\]"),
    Case("export-config-not-json", _on_export(lambda f: (f / "config.json").write_text("{not json")),
         ValueError, "config.json' is not valid JSON"),
    Case("export-config-a-list", _on_export(lambda f: (f / "config.json").write_text("[1, 2]")),
         ValueError, "config.json' must hold a JSON object"),
    Case("export-tampered-hyperparameter", _tampered(pooling="max"), ValueError, "`pooling` must be one of"),
    Case("export-tampered-model-type", _tampered(model_type="evil"), ValueError,
         "`model_type` 'evil' is not a registered pairzoo model"),
    Case("export-tampered-layers", _tampered(**{"backbone.num_hidden_layers": 3}), ValueError,
         "config.json' does not match model.safetensors.*missing_keys"),
    Case("export-tampered-sizes", _tampered(**{"backbone.intermediate_size": 128}), ValueError,
         "export' could not be loaded"),
    Case("export-over-existing-folder", _export_over_existing, FileExistsError, "export' already exists"),
    Case("export-foreign-model",
         _call(lambda c: export_model(BertModel(c.model.config.backbone_config), c.tokenizer, c.tmp / "out")),
         ValueError, "BertModel is not a registered pairzoo model"),
    Case("verify-export-pickle", _on_export(lambda f: (f / "extra.pkl").write_bytes(b"x"), verify_export),
         ValueError, r"pickle files \['extra.pkl'\]"),
]  # fmt: skip


def test_the_table_is_large_and_ids_are_unique():
    assert len(CASES) >= 40
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    tokenizer = load_tokenizer("tiny-bert")
    model = create_model("cross-encoder", backbone="tiny-bert").eval()
    scorer = pipeline("conditional-similarity", model=model, tokenizer=tokenizer)
    export = export_model(model, tokenizer, tmp_path_factory.mktemp("shared") / "export")
    return tokenizer, model, scorer, export


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_raises_documented_error_naming_the_culprit_and_writes_nothing(case, shared, tmp_path):
    ctx = Ctx(tmp_path, *shared)
    bad_call = case.setup(ctx)
    before = _snapshot(tmp_path)
    with pytest.raises(case.error, match=case.match):
        bad_call()
    assert _snapshot(tmp_path) == before, "a failing call must leave the disk as it found it"
