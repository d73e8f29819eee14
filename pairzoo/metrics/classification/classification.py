"""Accuracy and F1 (x100) of class predictions, with the positive class of a binary F1 named by the caller.

A local `evaluate` metric module of pairzoo (loaded from its path, offline). `average="binary"` needs `pos_label`
(the index of the positive class: RTE/QNLI's `entailment` is index 0, MRPC's paraphrase index 1), so the F1 is never
silently that of class 1; `average="macro"` averages the per-class F1 over `num_labels` classes (3 for SICK-E/SNLI).
A class absent from both the predictions and the references has no F1 (0/0): a binary F1 of such a positive class is
NaN, and the macro average leaves such a class out (it would count it as 0, so perfect predictions of an evaluation
set without one class would not score 100).
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
    labels (list of int): the classes of a macro F1 (default: those in predictions and references); those absent
        from both are left out.
Returns:
    accuracy (float), f1 (float): x 100; f1 is NaN when no class it averages occurs in predictions or references.
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
        occurring, nan = set(predictions.tolist()) | set(references.tolist()), float("nan")
        if average == "binary":
            if pos_label is None:
                raise ValueError("average='binary' needs `pos_label`, the index of the positive class.")
            f1 = f1_score(references, predictions, average="binary", pos_label=pos_label, zero_division=0)
            f1 = f1 if pos_label in occurring else nan
        elif average == "macro":
            f1 = nan
            if labels is None or any(label in occurring for label in labels):
                labels = None if labels is None else [label for label in labels if label in occurring]
                f1 = f1_score(references, predictions, average="macro", labels=labels, zero_division=0)
        else:
            raise ValueError(f"`average` must be 'binary' or 'macro', got {average!r}.")
        return {"accuracy": float(accuracy_score(references, predictions) * 100), "f1": float(f1 * 100)}
