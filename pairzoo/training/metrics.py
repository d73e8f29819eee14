"""Evaluation metrics computed locally (scipy / scikit-learn); `evaluate.load` of Hub metrics fails offline."""

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score
from transformers import EvalPrediction


def regression_metrics(predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Spearman and Pearson (x100, as papers report them) and MSE on the label scale."""
    predictions, labels = np.asarray(predictions, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    if predictions.shape != labels.shape or predictions.size < 2:
        raise ValueError(f"need two equal-length arrays of >= 2 values, got {predictions.shape} and {labels.shape}.")
    constant = np.ptp(predictions) == 0 or np.ptp(labels) == 0
    return {
        "spearman": 0.0 if constant else float(spearmanr(predictions, labels).statistic * 100),
        "pearson": 0.0 if constant else float(pearsonr(predictions, labels).statistic * 100),
        "mse": float(np.mean((predictions - labels) ** 2)),
    }


def classification_metrics(logits: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Accuracy and F1 (x100): binary F1 of class 1 for two classes, macro F1 otherwise."""
    logits, labels = np.asarray(logits), np.asarray(labels).astype(int)
    predicted = logits.argmax(-1) if logits.ndim == 2 else logits.astype(int)
    average = "binary" if logits.ndim == 2 and logits.shape[-1] == 2 else "macro"
    return {
        "accuracy": float(accuracy_score(labels, predicted) * 100),
        "f1": float(f1_score(labels, predicted, average=average, zero_division=0) * 100),
    }


def compute_metrics_fn(num_labels: int):
    """A `Trainer` `compute_metrics` for a model with `num_labels` outputs.

    Regression models return `(logits, scores)`; the scores (label scale) are compared with the labels.
    """

    def compute(prediction: EvalPrediction) -> dict[str, float]:
        outputs = prediction.predictions
        if num_labels == 1:
            scores = outputs[1] if isinstance(outputs, (tuple, list)) else outputs
            return regression_metrics(np.asarray(scores).reshape(-1), np.asarray(prediction.label_ids).reshape(-1))
        logits = outputs[0] if isinstance(outputs, (tuple, list)) else outputs
        return classification_metrics(logits, prediction.label_ids)

    return compute
