"""Collators: raw text rows in, model inputs out (tokenised per batch, padded to the batch's longest example).

One collator per model `input_format` (`COLLATORS`); they differ only in how texts become tensors, so label checks
live once in `ConditionalPairCollator`. `check_training_data` checks whole data sets against a collator before
training, so a bad row is an error naming its data set, split and row, not a failure inside some batch.

With a plain `transformers.Trainer`: `tokenize_dataset` turns a `datasets.Dataset` of text columns into exactly the
model's `forward` inputs and `labels`, which the Trainer keeps with its default `remove_unused_columns=True`, and the
same collator pads them:

    train = tokenize_dataset(Dataset.from_dict(rows), model, tokenizer, max_length=128)
    trainer = Trainer(model=model, args=TrainingArguments("out"), train_dataset=train,
                      data_collator=make_collator(model, tokenizer, 128), processing_class=tokenizer,
                      compute_metrics=compute_metrics_fn(model.config.num_labels))

A text data set collated per batch (what `pairzoo.train` does) needs `TrainingArguments(remove_unused_columns=False)`,
since the Trainer drops columns its model's `forward` does not take (the texts) before the collator sees them.
"""

import dataclasses
import math
from dataclasses import dataclass, fields

import numpy as np
import torch
from datasets import Dataset
from transformers.utils import logging

from ..configuration.common import check_max_length
from ..modeling.common import check_input_values, input_vocab_size
from ..modeling.modeling_neighbor_attention import encode_neighbor_attention_inputs, resolve_label_words
from ..pipelines.pipeline_conditional_similarity import (
    _segment_ids,
    encode_bi_inputs,
    encode_conditional_inputs,
    encode_pair_inputs,
    encode_tri_inputs,
    validate_texts,
)

logger = logging.get_logger(__name__)


@dataclass
class ConditionalPairCollator:
    """Batches rows with `sentence1`, optional `sentence2`/`condition` and `label` for cross-encoders
    (`input_format = "cross"`: `[CLS] s1 SEP s2 SEP c SEP` with the tokenizer's own separators,
    `encode_conditional_inputs`).

    Regression labels must be finite and within `label_range` when one is given; class labels must be valid indices.
    Every batch gets the model's value checks (`pairzoo.modeling.common.check_input_values`: token ids within
    `vocab_size`, the model's vocabulary, when given; `mask_positions` within the sequence; labels) here, on CPU
    tensors, so the model's forward needs none.
    """

    tokenizer: object
    max_length: int = 128
    num_labels: int = 1
    label_range: "tuple[float, float] | None" = None
    vocab_size: "int | None" = None

    encoder = staticmethod(encode_conditional_inputs)
    text_fields = ("sentence1", "sentence2", "condition")  # the row fields this collator encodes
    keeps_condition_whole = True  # the condition is never truncated: one that cannot fit is an error

    def encode(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        """Model inputs of the rows' texts (absent optional fields are passed as None)."""
        first = rows[0]
        return self.encoder(
            self.tokenizer,
            [r["sentence1"] for r in rows],
            [r["sentence2"] for r in rows] if "sentence2" in first else None,
            [r["condition"] for r in rows] if "condition" in first else None,
            max_length=self.max_length,
        )

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        """The batch of `rows`: text rows (`sentence1`, ...; `label`) are encoded, rows `tokenize_dataset` made
        (model inputs; `labels`, or `label` as transformers' collators also read it) padded; labels are checked
        (`_labels`). Rows that do not all give the same fields are a ValueError (`_check_same_fields`); a row with
        neither texts nor model inputs is a KeyError naming `sentence1` and saying why the Trainer may have dropped
        it."""
        if not rows:
            raise ValueError("cannot collate an empty batch.")
        self._check_same_fields(rows)
        if "input_ids" in rows[0]:
            batch, label_key = pad_inputs(rows, self.tokenizer), "labels" if "labels" in rows[0] else "label"
        elif "sentence1" in rows[0]:
            batch, label_key = self.encode(rows), "label"
        else:
            raise KeyError(
                f"sentence1: a row has neither texts (`sentence1`, ...) nor model inputs (`input_ids`); its keys: "
                f"{sorted(rows[0])}. "
                "`transformers.Trainer` drops the columns its model's `forward` does not take before collating "
                "(`remove_unused_columns=True`, the default): tokenize the data set first "
                "(`pairzoo.training.tokenize_dataset`), or pass TrainingArguments(remove_unused_columns=False) to "
                "collate the texts."
            )
        if label_key in rows[0]:
            batch["labels"] = self._labels([r[label_key] for r in rows])
        check_input_values(batch, self.vocab_size, self.num_labels)
        return batch

    def _check_same_fields(self, rows: list[dict]) -> None:
        """A ValueError naming the row and the field when the rows of a batch do not give the same text and label
        fields (model inputs, for tokenized rows): the batch is encoded by the first row's fields, so another row's
        `sentence2` or `label` would otherwise be dropped without a word."""
        tokenized = "input_ids" in rows[0]
        relevant = set(self.text_fields) | {"label", "labels"}
        first = {key for key in rows[0] if tokenized or key in relevant}
        for i, row in enumerate(rows[1:], start=1):
            fields = {key for key in row if tokenized or key in relevant}
            if fields != first:
                raise ValueError(
                    f"row {i} of the batch has fields {sorted(fields)} but row 0 has {sorted(first)}: every row of a "
                    "batch needs the same fields."
                )

    def _labels(self, labels: list) -> torch.Tensor:
        for i, label in enumerate(labels):
            if label is None or isinstance(label, (str, bool, np.bool_)):
                raise ValueError(f"`label`[{i}] must be a number, got {label!r}.")
            try:
                value = float(label)
            except (TypeError, ValueError) as err:
                raise ValueError(f"`label`[{i}] must be a number, got {label!r}.") from err
            if self.num_labels == 1:
                if not math.isfinite(value):
                    raise ValueError(f"`label`[{i}] is not finite ({label}).")
                if self.label_range and not self.label_range[0] <= value <= self.label_range[1]:
                    raise ValueError(f"`label`[{i}] = {label} is outside {list(self.label_range)}.")
            elif not math.isfinite(value) or int(value) != value or not 0 <= value < self.num_labels:
                raise ValueError(f"`label`[{i}] = {label} is not a class index in [0, {self.num_labels}).")
        dtype = torch.float32 if self.num_labels == 1 else torch.long
        return torch.tensor(labels, dtype=dtype)


@dataclass
class SentencePairCollator(ConditionalPairCollator):
    """`sentence1`/`sentence2` rows with the tokenizer's own pair encoding (token types included), for models that
    read a plain sentence pair (`input_format = "pair"`)."""

    text_fields = ("sentence1", "sentence2")
    keeps_condition_whole = False

    def encode(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        texts = {field: validate_texts(field, [r[field] for r in rows]) for field in ("sentence1", "sentence2")}
        return encode_pair_inputs(self.tokenizer, texts["sentence1"], texts["sentence2"], max_length=self.max_length)


@dataclass
class TriEncoderCollator(ConditionalPairCollator):
    """Rows for tri-encoders (`input_format = "tri"`): each text encoded alone (`input_ids`, `input_ids_2`,
    `input_ids_3` with their attention masks); each text is truncated on its own, the condition included."""

    encoder = staticmethod(encode_tri_inputs)
    keeps_condition_whole = False


@dataclass
class BiEncoderCollator(ConditionalPairCollator):
    """Rows for bi-encoders (`input_format = "bi"`): `[CLS] s SEP c SEP` per sentence (the tokenizer's pair encoding
    of sentence and condition) with `sentence_mask` / `condition_mask` (second-sentence keys end in `_2`); the
    condition is required."""

    encoder = staticmethod(encode_bi_inputs)


@dataclass
class PromptCollator(ConditionalPairCollator):
    """Rows for neighbor attention (`input_format = "prompt"`): `[CLS] [MASK]' Y1 or ... of [MASK] [SEP] [MASK]' s1
    [SEP] [MASK]' s2 [SEP]` with `mask_positions`; label words and prompt options come from `model_config`."""

    model_config: object = None
    text_fields = ("sentence1", "sentence2")
    keeps_condition_whole = False

    def encode(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        config = self.model_config
        if config is None:
            raise ValueError("PromptCollator needs `model_config` (the model's config) for the label words.")
        return encode_neighbor_attention_inputs(
            self.tokenizer,
            [r["sentence1"] for r in rows],
            [r["sentence2"] for r in rows] if "sentence2" in rows[0] else None,
            label_words=resolve_label_words(config),
            max_length=self.max_length,
            connecting_tokens=config.connecting_tokens,
            prompt_format=config.prompt_format,
        )


COLLATORS = {
    "cross": ConditionalPairCollator,
    "pair": SentencePairCollator,
    "tri": TriEncoderCollator,
    "bi": BiEncoderCollator,
    "prompt": PromptCollator,
}


def make_collator(
    model, tokenizer, max_length: int, label_range: "tuple[float, float] | None" = None
) -> ConditionalPairCollator:
    """The collator for `model.input_format` (`cross` by default); token ids are checked against the model's
    vocabulary."""
    input_format = getattr(model, "input_format", "cross")
    if input_format not in COLLATORS:
        raise ValueError(f"no collator for input_format {input_format!r}; known: {sorted(COLLATORS)}.")
    collator_class = COLLATORS[input_format]
    extra = {"model_config": model.config} if "model_config" in {f.name for f in fields(collator_class)} else {}
    vocab_size = input_vocab_size(model.config)
    return collator_class(tokenizer, max_length, model.config.num_labels, label_range, vocab_size, **extra)


def _shortest_input(collator: ConditionalPairCollator, fields: "list[str]") -> int:
    """Tokens of the longest sequence `collator` encodes for a row with a one-token text (`a`) in each of `fields`,
    special tokens included, with no length limit: the least `max_length` a row of these fields needs."""
    unlimited = dataclasses.replace(collator, max_length=1_000_000)
    encoded = unlimited.encode([{field: "a" for field in fields}])
    return max(tensor.shape[1] for key, tensor in encoded.items() if key.startswith("input_ids"))


def check_training_data(
    model, collator: ConditionalPairCollator, splits: "dict[str, Dataset]", dataset: str, flag: str = "--max_length"
) -> None:
    """Check data set `dataset` (its `splits`, name -> rows; a split named "" is the whole data set) against
    `collator` and `model` before training.

    ValueErrors: the collator's `max_length` above the backbone's limit (`check_max_length`) or too small for the
    model's input format (one token per text and the special tokens must fit), both naming `flag`; a text without a
    visible character, a bad label (`ConditionalPairCollator._labels`) or, where the condition is never truncated, a
    condition too long to fit, naming the data set, split and row. A field whose text encodes to only the unknown
    token on some rows (emoji, say, for a WordPiece tokenizer) is logged as a warning with the row count.
    """
    config = model.config
    check_max_length(collator.max_length, getattr(config, "backbone_config", None) or config, flag)
    tokenizer, max_length = collator.tokenizer, collator.max_length
    columns = next(iter(splits.values())).column_names
    text_fields = [field for field in collator.text_fields if field in columns]
    shortest = _shortest_input(collator, text_fields)
    if max_length < shortest:
        raise ValueError(
            f"`{flag}` {max_length} is too small for {type(model).__name__} on {dataset!r}: its input "
            f"({getattr(model, 'input_format', 'cross')} format) with one token for each of {', '.join(text_fields)} "
            f"and its special tokens already takes {shortest} tokens; use {flag} >= {shortest}."
        )
    whole_condition = collator.keeps_condition_whole and "condition" in text_fields
    # `shortest` holds a one-token condition; a row needs that plus the rest of its condition's tokens
    condition_overhead = shortest - len(_segment_ids(tokenizer, ["a"])[0])
    for split, data in splits.items():
        where = f"dataset {dataset!r}" + (f", {split} split" if split else "")
        texts = {field: list(data[field]) for field in text_fields}
        try:
            for field, values in texts.items():
                validate_texts(field, values)
            if "label" in data.column_names:
                collator._labels(list(data["label"]))
        except ValueError as err:
            raise ValueError(f"{where}: {err} ([i] is the row)") from err
        ids = {field: _segment_ids(tokenizer, values) for field, values in texts.items()}
        if whole_condition:
            for row, condition in enumerate(ids["condition"]):
                if condition_overhead + len(condition) > max_length:
                    raise ValueError(
                        f"{where}, row {row}: `condition` {texts['condition'][row][:60]!r} has {len(condition)} "
                        f"tokens, and conditions are never truncated: with the sentences' first tokens and the "
                        f"special tokens it needs {flag} >= {condition_overhead + len(condition)}, but {flag} is "
                        f"{max_length}; shorten that condition or raise {flag}."
                    )
        if tokenizer.unk_token_id is None:
            continue
        for field, rows in ids.items():
            unknown = [row for row, tokens in enumerate(rows) if tokens and set(tokens) == {tokenizer.unk_token_id}]
            if unknown:
                logger.warning(
                    "%s: `%s` of %d of %d rows encodes to only the unknown token (%s), e.g. row %d %r: the model "
                    "reads no word of it there.",
                    where,
                    field,
                    len(unknown),
                    len(rows),
                    tokenizer.unk_token,
                    unknown[0],
                    texts[field][unknown[0]][:60],
                )


def pad_inputs(rows: "list[dict]", tokenizer) -> "dict[str, torch.Tensor]":
    """The model inputs of tokenized `rows` (`tokenize_dataset`'s) as a batch: each sequence right-padded to the
    batch's longest, `input_ids*` with the tokenizer's pad id, masks and token types with 0, as the text encoders
    pad; a number per row (`mask_positions`) stacked. `labels` are left to the caller."""
    pad_id = tokenizer.pad_token_id or 0
    batch = {}
    for key in rows[0]:
        if key in ("labels", "label"):
            continue
        values = [row[key].tolist() if hasattr(row[key], "tolist") else row[key] for row in rows]
        if not isinstance(values[0], (list, tuple)):
            batch[key] = torch.tensor(values, dtype=torch.long)
            continue
        width = max(len(value) for value in values)
        pad = pad_id if key.startswith("input_ids") else 0
        batch[key] = torch.tensor([list(value) + [pad] * (width - len(value)) for value in values], dtype=torch.long)
    return batch


def _unpadded(encoded: "dict[str, torch.Tensor]") -> "dict[str, list]":
    """Per-row lists of a right-padded encoded batch, each sequence cut to its length (the sum of the attention
    mask of its text: `attention_mask`, `attention_mask_2` or `attention_mask_3` by the key's suffix)."""
    out = {}
    for key, tensor in encoded.items():
        if tensor.dim() == 1:
            out[key] = tensor.tolist()
            continue
        suffix = key[-2:] if key[-2:] in ("_2", "_3") else ""
        lengths = encoded["attention_mask" + suffix].sum(1).tolist()
        out[key] = [row[:length] for row, length in zip(tensor.tolist(), lengths)]
    return out


def align_special_tokens(model, tokenizer) -> None:
    """Give `model.config` the PAD, BOS and EOS token ids `tokenizer` defines. pairzoo's method configs declare none
    (the backbone's are in `backbone_config`), so `transformers.Trainer` would otherwise set them at the start of
    training, warning that the tokenizer's tokens differ from the model config's."""
    config = model.config.get_text_config()
    for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
        token_id = getattr(tokenizer, name, None)
        if token_id is not None:
            setattr(config, name, token_id)


def check_class_names(dataset: Dataset, config, name: str = "dataset") -> None:
    """A ValueError when `dataset`'s `label` column is a `datasets.ClassLabel` whose class names are not the model's
    (`config.id2label`, in id order): the model would learn id i as the dataset's class i and name it as its own
    class i. A model whose classes are unnamed (transformers' `LABEL_i`) takes any names."""
    feature = dataset.features.get("label")
    names = getattr(feature, "names", None)
    if not names or config.num_labels < 2:
        return
    own = [str(config.id2label[i]) for i in range(config.num_labels)]
    if own == [f"LABEL_{i}" for i in range(config.num_labels)] or own == list(names):
        return
    raise ValueError(
        f"dataset {name!r} names its classes {list(names)} (its `label` ClassLabel), in id order, but the model's "
        f"`id2label` is {own}: create the model with id2label={dict(enumerate(names))} (or cast the column to the "
        "model's order)."
    )


def tokenize_dataset(dataset: Dataset, model, tokenizer, max_length: int = 128, name: str = "dataset") -> Dataset:
    """`dataset` (text columns `sentence1`, optional `sentence2`/`condition`, optional `label`) as exactly the inputs
    of `model.forward` (`input_ids`, `attention_mask`, ... of its input format, unpadded) and `labels`: what a plain
    `transformers.Trainer` keeps with its default `remove_unused_columns=True`; `make_collator(model, tokenizer,
    max_length)` pads them into batches equal to those it encodes from the texts.

    The rows are checked first (`check_training_data`, errors naming the data set `name` and the row; regression
    labels against the model's `label_min`/`label_max`), and `model`'s config gets the tokenizer's special token ids
    (`align_special_tokens`). Other columns are dropped.
    """
    if "sentence1" not in dataset.column_names:
        raise ValueError(
            f"dataset {name!r} has no `sentence1` column (its columns: {dataset.column_names}); pairzoo's rows are "
            "`sentence1`, optional `sentence2` and `condition`, and `label`."
        )
    config = model.config
    check_class_names(dataset, config, name)
    label_range = (config.label_min, config.label_max) if config.num_labels == 1 else None
    collator = make_collator(model, tokenizer, max_length, label_range)
    check_training_data(model, collator, {"": dataset}, name, flag="max_length")
    align_special_tokens(model, tokenizer)
    fields = [field for field in collator.text_fields if field in dataset.column_names]

    def encode(batch: dict) -> dict:
        rows = [dict(zip(fields, texts)) for texts in zip(*(batch[field] for field in fields))]
        encoded = _unpadded(collator.encode(rows))
        if "label" in batch:
            encoded["labels"] = batch["label"]
        return encoded

    return dataset.map(encode, batched=True, remove_columns=dataset.column_names, desc="Tokenizing")
