"""Evaluation metrics through Hugging Face `evaluate`: pairzoo's own metric modules (`pairzoo.metrics`), loaded
from their path inside the package, so no Hub access is needed."""

import numpy as np
from transformers import EvalPrediction

from ..metrics import load_metric

# The positive class of a binary F1, by class name: entailment for RTE/QNLI (their class 0), else the class named
# "1" (paraphrase, duplicate, entails in MRPC/Quora/SciTail), else the second class.
POSITIVE_CLASS_NAMES = ("entailment", "1")


def positive_class(label_names: "list[str] | None") -> int:
    """The index of the positive class of a two-class task with classes `label_names` (see POSITIVE_CLASS_NAMES)."""
    for name in POSITIVE_CLASS_NAMES:
        if label_names and name in label_names:
            return list(label_names).index(name)
    return 1


def regression_metrics(predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Spearman and Pearson (x100, as papers report them; NaN when either side is constant) and MSE on the label
    scale (the `regression` module)."""
    predictions, labels = np.asarray(predictions, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    if predictions.shape != labels.shape or predictions.size < 2:
        raise ValueError(f"need two equal-length arrays of >= 2 values, got {predictions.shape} and {labels.shape}.")
    return load_metric("regression").compute(predictions=predictions.reshape(-1), references=labels.reshape(-1))


def classification_metrics(
    logits: np.ndarray, labels: np.ndarray, label_names: "list[str] | None" = None
) -> dict[str, float]:
    """Accuracy and F1 (x100; the `classification` module): for two classes the F1 of the positive class
    (`positive_class(label_names)`: RTE/QNLI's entailment, MRPC's paraphrase), for more the macro F1."""
    logits, labels = np.asarray(logits), np.asarray(labels).astype(int)
    predicted = logits.argmax(-1) if logits.ndim == 2 else logits.astype(int)
    num_classes = logits.shape[-1] if logits.ndim == 2 else len(label_names or ()) or int(max(labels.max(), 1)) + 1
    if num_classes == 2:
        options = {"average": "binary", "pos_label": positive_class(label_names)}
    else:
        options = {"average": "macro", "labels": list(range(num_classes))}
    return load_metric("classification").compute(predictions=predicted, references=labels, **options)


def compute_metrics_fn(num_labels: int, label_names: "list[str] | None" = None):
    """A `Trainer` `compute_metrics` for a model with `num_labels` outputs (`label_names`: its classes, in order).

    Regression models return `(logits, scores)`; the scores (label scale) are compared with the labels.
    """

    def compute(prediction: EvalPrediction) -> dict[str, float]:
        outputs = prediction.predictions
        if num_labels == 1:
            scores = outputs[1] if isinstance(outputs, (tuple, list)) else outputs
            return regression_metrics(np.asarray(scores).reshape(-1), np.asarray(prediction.label_ids).reshape(-1))
        logits = outputs[0] if isinstance(outputs, (tuple, list)) else outputs
        return classification_metrics(logits, prediction.label_ids, label_names)

    return compute
