"""Evaluation metrics through Hugging Face `evaluate`: pairzoo's own metric modules (`pairzoo.metrics`), loaded
from their path inside the package, so no Hub access is needed."""

import numpy as np
from transformers import EvalPrediction

from ..metrics import load_metric

# The positive class of a binary F1, by class name: entailment for RTE/QNLI (their class 0), else the class named
# "1" (paraphrase, duplicate, entails in MRPC/Quora/SciTail), else the second class.
POSITIVE_CLASS_NAMES = ("entailment", "1")
# Class names that say "no" (compared lower-cased, with spaces and hyphens as underscores), and their prefixes.
NEGATIVE_CLASS_NAMES = ("0", "no", "false", "negative", "different", "mismatch", "unrelated", "contradiction")
NEGATIVE_PREFIXES = ("not_", "non_", "no_")


def _says_no(name: str) -> bool:
    name = str(name).strip().lower().replace("-", "_").replace(" ", "_")
    return name in NEGATIVE_CLASS_NAMES or name.startswith(NEGATIVE_PREFIXES)


def positive_class(label_names: "list[str] | None") -> int:
    """The index of the positive class of a two-class task with classes `label_names`: a name of
    `POSITIVE_CLASS_NAMES` (RTE/QNLI's entailment, id "1"), else the one of two names where the other says no
    (`duplicate` against `not_duplicate`, `yes` against `no`), else index 1."""
    for name in POSITIVE_CLASS_NAMES:
        if label_names and name in label_names:
            return list(label_names).index(name)
    if label_names and len(label_names) == 2 and _says_no(label_names[0]) != _says_no(label_names[1]):
        return 0 if _says_no(label_names[1]) else 1
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
    (`positive_class(label_names)`: RTE/QNLI's entailment, MRPC's paraphrase), for more the macro F1 over the classes
    that occur in the labels or the predictions.

    `logits` are (N, num_classes) class scores or (N,) predicted class indices; `labels` (N,) class indices. Labels
    and predicted indices that are not whole numbers in [0, num_classes), and `label_names` of another length than
    the logits' classes, are a ValueError naming them. NaN or infinite class scores make both metrics NaN (undefined,
    as the correlations of a diverged regressor), not the score of whichever class `argmax` picks.
    """
    logits, labels = np.asarray(logits), np.asarray(labels)
    if logits.ndim not in (1, 2) or labels.ndim != 1 or len(logits) != len(labels):
        raise ValueError(
            f"need `logits` (N, num_classes) or (N,) and `labels` (N,), got {logits.shape} and {labels.shape}."
        )
    try:
        indices = {"labels": labels.astype(np.float64)}
    except (TypeError, ValueError) as err:
        raise ValueError(f"`labels` must be class indices, got dtype {labels.dtype} ({err}).") from err
    if logits.ndim == 2:
        num_classes = logits.shape[-1]
        if label_names is not None and len(label_names) != num_classes:
            raise ValueError(f"`label_names` has {len(label_names)} names but the logits have {num_classes} classes.")
    else:
        indices["predictions"] = logits.astype(np.float64)
        seen = np.concatenate(list(indices.values()))
        largest = int(seen[np.isfinite(seen)].max(initial=0))
        num_classes = len(label_names) if label_names is not None else max(largest, 1) + 1
    for name, values in indices.items():
        bad = ~np.isfinite(values) | (values != np.round(values)) | (values < 0) | (values >= num_classes)
        if bad.any():
            raise ValueError(
                f"`{name}` must be class indices in [0, {num_classes}), got {values[bad][:5].tolist()} "
                f"(at {np.flatnonzero(bad)[:5].tolist()})."
            )
    if not np.isfinite(logits.astype(np.float64)).all():
        return {"accuracy": float("nan"), "f1": float("nan")}
    labels = labels.astype(int)
    predicted = logits.argmax(-1) if logits.ndim == 2 else logits.astype(int)
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
        logits = np.asarray(outputs[0] if isinstance(outputs, (tuple, list)) else outputs)
        if logits.ndim != 2 or logits.shape[-1] != num_labels:
            raise ValueError(f"the model's logits have shape {logits.shape}, expected (N, num_labels={num_labels}).")
        return classification_metrics(logits, prediction.label_ids, label_names)

    return compute
