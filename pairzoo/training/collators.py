"""Collators: raw text rows in, model inputs out (tokenised per batch, padded to the batch's longest example).

One collator per model `input_format` (`COLLATORS`); they differ only in how texts become tensors, so label checks
live once in `ConditionalPairCollator`.
"""

import math
from dataclasses import dataclass, fields

import torch

from ..modeling.modeling_neighbor_attention import encode_neighbor_attention_inputs, resolve_label_words
from ..pipelines.pipeline_conditional_similarity import (
    encode_bi_inputs,
    encode_conditional_inputs,
    encode_pair_inputs,
    encode_tri_inputs,
    validate_texts,
)


@dataclass
class ConditionalPairCollator:
    """Batches rows with `sentence1`, optional `sentence2`/`condition` and `label` for cross-encoders
    (`input_format = "cross"`: `[CLS] s1 SEP s2 SEP c SEP`).

    Regression labels must be finite and within `label_range` when one is given; class labels must be valid indices.
    """

    tokenizer: object
    max_length: int = 128
    num_labels: int = 1
    label_range: "tuple[float, float] | None" = None

    encoder = staticmethod(encode_conditional_inputs)

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
        if not rows:
            raise ValueError("cannot collate an empty batch.")
        batch = self.encode(rows)
        if "label" in rows[0]:
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
class SentencePairCollator(ConditionalPairCollator):
    """`sentence1`/`sentence2` rows with the tokenizer's own pair encoding (token types included), for models that
    read a plain sentence pair (`input_format = "pair"`)."""

    def encode(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        texts = {field: validate_texts(field, [r[field] for r in rows]) for field in ("sentence1", "sentence2")}
        return encode_pair_inputs(self.tokenizer, texts["sentence1"], texts["sentence2"], max_length=self.max_length)


@dataclass
class TriEncoderCollator(ConditionalPairCollator):
    """Rows for tri-encoders (`input_format = "tri"`): each text encoded alone (`input_ids`, `input_ids_2`,
    `input_ids_3` with their attention masks)."""

    encoder = staticmethod(encode_tri_inputs)


@dataclass
class BiEncoderCollator(ConditionalPairCollator):
    """Rows for bi-encoders (`input_format = "bi"`): `[CLS] s SEP c SEP` per sentence with `sentence_mask` /
    `condition_mask` (second-sentence keys end in `_2`); the condition is required."""

    encoder = staticmethod(encode_bi_inputs)


@dataclass
class PromptCollator(ConditionalPairCollator):
    """Rows for neighbor attention (`input_format = "prompt"`): `[CLS] [MASK]' Y1 or ... of [MASK] [SEP] [MASK]' s1
    [SEP] [MASK]' s2 [SEP]` with `mask_positions`; label words and prompt options come from `model_config`."""

    model_config: object = None

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
    """The collator for `model.input_format` (`cross` by default)."""
    input_format = getattr(model, "input_format", "cross")
    if input_format not in COLLATORS:
        raise ValueError(f"no collator for input_format {input_format!r}; known: {sorted(COLLATORS)}.")
    collator_class = COLLATORS[input_format]
    extra = {"model_config": model.config} if "model_config" in {f.name for f in fields(collator_class)} else {}
    return collator_class(tokenizer, max_length, model.config.num_labels, label_range, **extra)
