"""Accuracy and F1 (x100) of class predictions, with the positive class of a binary F1 named by the caller.

A local `evaluate` metric module of pairzoo (loaded from its path, offline). `average="binary"` needs `pos_label`
(the index of the positive class: RTE/QNLI's `entailment` is index 0, MRPC's paraphrase index 1), so the F1 is never
silently that of class 1; `average="macro"` averages the per-class F1 over `num_labels` classes (3 for SICK-E/SNLI).
"""

import datasets
import evaluate
import numpy as np
from sklearn.metrics import accuracy_score, f1_score

_DESCRIPTION = __doc__
_KWARGS_DESCRIPTION = """
Args:
    predictions (list of int): predicted class indices.
    references (list of int): gold class indices.
    average (str): "binary" (F1 of `pos_label`) or "macro" (mean F1 over the classes `labels`).
    pos_label (int): the positive class's index; required with average="binary".
    labels (list of int): the classes of a macro F1 (default: those in predictions and references).
Returns:
    accuracy (float), f1 (float): x 100.
"""
_CITATION = """@book{van1979information,
  title={Information Retrieval}, author={van Rijsbergen, C. J.}, publisher={Butterworths}, year={1979}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Classification(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("int64"), "references": datasets.Value("int64")}
            ),
        )

    def _compute(self, predictions, references, average: str = "macro", pos_label=None, labels=None) -> dict:
        predictions, references = np.asarray(predictions), np.asarray(references)
        if average == "binary":
            if pos_label is None:
                raise ValueError("average='binary' needs `pos_label`, the index of the positive class.")
            f1 = f1_score(references, predictions, average="binary", pos_label=pos_label, zero_division=0)
        elif average == "macro":
            f1 = f1_score(references, predictions, average="macro", labels=labels, zero_division=0)
        else:
            raise ValueError(f"`average` must be 'binary' or 'macro', got {average!r}.")
        return {"accuracy": float(accuracy_score(references, predictions) * 100), "f1": float(f1 * 100)}
