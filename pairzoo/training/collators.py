"""Collators: raw text rows in, model inputs out (tokenised per batch, padded to the batch's longest example)."""

import math
from dataclasses import dataclass

import torch

from ..pipelines.pipeline_conditional_similarity import encode_conditional_inputs


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
