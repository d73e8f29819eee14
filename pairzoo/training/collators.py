"""Collators: raw text rows in, model inputs out (tokenised per batch, padded to the batch's longest example)."""

import math
from dataclasses import dataclass

import torch

from ..pipelines.pipeline_conditional_similarity import encode_bi_inputs, encode_conditional_inputs, encode_tri_inputs


@dataclass
class ConditionalPairCollator:
    """Batches rows with `sentence1`, optional `sentence2`/`condition` and `label` for cross-encoder models.

    Regression labels must be finite and within `label_range` when one is given; class labels must be valid indices.
    """

    tokenizer: object
    max_length: int = 128
    num_labels: int = 1
    label_range: "tuple[float, float] | None" = None

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        if not rows:
            raise ValueError("cannot collate an empty batch.")
        first = rows[0]
        batch = encode_conditional_inputs(
            self.tokenizer,
            [r["sentence1"] for r in rows],
            [r["sentence2"] for r in rows] if "sentence2" in first else None,
            [r["condition"] for r in rows] if "condition" in first else None,
            max_length=self.max_length,
        )
        if "label" in first:
            batch["labels"] = self._labels([r["label"] for r in rows])
        return batch

    def _labels(self, labels: list) -> torch.Tensor:
        for i, label in enumerate(labels):
            if label is None or isinstance(label, (str, bool)):
                raise ValueError(f"`label`[{i}] must be a number, got {label!r}.")
            if self.num_labels == 1:
                if not math.isfinite(label):
                    raise ValueError(f"`label`[{i}] is not finite ({label}).")
                if self.label_range and not self.label_range[0] <= label <= self.label_range[1]:
                    raise ValueError(f"`label`[{i}] = {label} is outside {list(self.label_range)}.")
            elif int(label) != label or not 0 <= label < self.num_labels:
                raise ValueError(f"`label`[{i}] = {label} is not a class index in [0, {self.num_labels}).")
        dtype = torch.float32 if self.num_labels == 1 else torch.long
        return torch.tensor(labels, dtype=dtype)


@dataclass
class SentencePairCollator:
    """Batches `sentence1`/`sentence2`/`label` rows with the tokenizer's own pair encoding (token types included),
    for models that read a plain sentence pair (`input_format = "pair"`)."""

    tokenizer: object
    max_length: int = 128
    num_labels: int = 1
    label_range: "tuple[float, float] | None" = None

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        if not rows:
            raise ValueError("cannot collate an empty batch.")
        first = [r["sentence1"] for r in rows]
        second = [r["sentence2"] for r in rows]
        for field, texts in (("sentence1", first), ("sentence2", second)):
            for i, text in enumerate(texts):
                if not isinstance(text, str) or not text.strip():
                    raise ValueError(f"`{field}`[{i}] must be a non-empty string, got {text!r}.")
        batch = dict(
            self.tokenizer(
                first, second, truncation=True, max_length=self.max_length, padding=True, return_tensors="pt"
            )
        )
        if "label" in rows[0]:
            batch["labels"] = ConditionalPairCollator._labels(self, [r["label"] for r in rows])
        return batch


COLLATORS = {"cross": ConditionalPairCollator, "pair": SentencePairCollator}


def make_collator(
    model, tokenizer, max_length: int, label_range: "tuple[float, float] | None" = None
) -> "ConditionalPairCollator | SentencePairCollator":
    """The collator for `model.input_format` (`cross` by default)."""
    input_format = getattr(model, "input_format", "cross")
    if input_format not in COLLATORS:
        raise ValueError(f"no collator for input_format {input_format!r}; known: {sorted(COLLATORS)}.")
    return COLLATORS[input_format](tokenizer, max_length, model.config.num_labels, label_range)


@dataclass
class TriEncoderCollator:
    """Batches `sentence1`/`sentence2`/`condition`/`label` rows for tri-encoders (`input_format = "tri"`): each
    text encoded alone (`input_ids`, `input_ids_2`, `input_ids_3` with their attention masks)."""

    tokenizer: object
    max_length: int = 128
    num_labels: int = 1
    label_range: "tuple[float, float] | None" = None

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        if not rows:
            raise ValueError("cannot collate an empty batch.")
        first = rows[0]
        batch = encode_tri_inputs(
            self.tokenizer,
            [r["sentence1"] for r in rows],
            [r["sentence2"] for r in rows] if "sentence2" in first else None,
            [r["condition"] for r in rows] if "condition" in first else None,
            max_length=self.max_length,
        )
        if "label" in first:
            batch["labels"] = ConditionalPairCollator._labels(self, [r["label"] for r in rows])
        return batch


@dataclass
class BiEncoderCollator:
    """Batches `sentence1`/`sentence2`/`condition`/`label` rows for bi-encoders (`input_format = "bi"`):
    `[CLS] s SEP c SEP` per sentence with `sentence_mask`/`condition_mask` (second sentence keys end in `_2`)."""

    tokenizer: object
    max_length: int = 128
    num_labels: int = 1
    label_range: "tuple[float, float] | None" = None

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        if not rows:
            raise ValueError("cannot collate an empty batch.")
        first = rows[0]
        if "condition" not in first:
            raise ValueError("bi-encoder rows need a `condition`.")
        batch = encode_bi_inputs(
            self.tokenizer,
            [r["sentence1"] for r in rows],
            [r["sentence2"] for r in rows] if "sentence2" in first else None,
            [r["condition"] for r in rows],
            max_length=self.max_length,
        )
        if "label" in first:
            batch["labels"] = ConditionalPairCollator._labels(self, [r["label"] for r in rows])
        return batch


COLLATORS["tri"] = TriEncoderCollator
COLLATORS["bi"] = BiEncoderCollator
