"""pairzoo's metrics are `evaluate` modules loaded from the package's own folder: they agree with scipy and
scikit-learn, are NaN where undefined, name the positive class of a binary F1, and load offline in a fresh process."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score
from transformers import EvalPrediction

from pairzoo.metrics import METRICS, load_metric
from pairzoo.training.metrics import classification_metrics, compute_metrics_fn, positive_class, regression_metrics


def test_regression_agrees_with_scipy_and_is_nan_when_constant():
    rng = np.random.default_rng(0)
    predictions, labels = rng.normal(size=50), rng.uniform(0, 5, size=50)
    got = regression_metrics(predictions, labels)
    assert got["spearman"] == pytest.approx(spearmanr(predictions, labels).statistic * 100)
    assert got["pearson"] == pytest.approx(pearsonr(predictions, labels).statistic * 100)
    assert got["mse"] == pytest.approx(np.mean((predictions - labels) ** 2))
    constant = regression_metrics(np.full(50, 2.5), labels)
    assert math.isnan(constant["spearman"]) and math.isnan(constant["pearson"]) and math.isfinite(constant["mse"])


@pytest.mark.parametrize(
    ("names", "positive"),
    [(["entailment", "not_entailment"], 0), (["0", "1"], 1), (["no", "yes"], 1)],
)
def test_binary_f1_is_that_of_the_named_positive_class(names, positive):
    rng = np.random.default_rng(1)
    logits, labels = rng.normal(size=(40, 2)), rng.integers(0, 2, size=40)
    assert positive_class(names) == positive
    got = classification_metrics(logits, labels, names)
    predicted = logits.argmax(-1)
    assert got["accuracy"] == pytest.approx(accuracy_score(labels, predicted) * 100)
    assert got["f1"] == pytest.approx(f1_score(labels, predicted, pos_label=positive) * 100)
    assert got["f1"] != pytest.approx(f1_score(labels, predicted, pos_label=1 - positive) * 100)


def test_three_classes_get_macro_f1_over_every_class():
    rng = np.random.default_rng(2)
    logits, labels = rng.normal(size=(60, 3)), rng.integers(0, 3, size=60)
    logits[:, 2] = -10  # class 2 never predicted: still counted in the macro average
    got = compute_metrics_fn(3, ["ENTAILMENT", "NEUTRAL", "CONTRADICTION"])(EvalPrediction(logits, labels))
    expected = f1_score(labels, logits.argmax(-1), average="macro", labels=[0, 1, 2], zero_division=0)
    assert got["f1"] == pytest.approx(expected * 100)


def test_ranking_mrr_and_hits():
    got = load_metric("ranking").compute(predictions=[1, 2, 4, 20], ks=(1, 3, 10))
    assert got["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 4 + 1 / 20) / 4)
    assert (got["hits@1"], got["hits@3"], got["hits@10"]) == (0.25, 0.5, 0.75)
    with pytest.raises(ValueError, match=">= 1"):
        load_metric("ranking").compute(predictions=[0, 1])


def test_bad_metric_arguments_are_named():
    with pytest.raises(ValueError, match="unknown metric 'bleu'"):
        load_metric("bleu")
    with pytest.raises(ValueError, match="pos_label"):
        load_metric("classification").compute(predictions=[0, 1], references=[0, 1], average="binary")


def test_metrics_load_offline_in_a_fresh_process(tmp_path):
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    code = (
        "from pairzoo.metrics import METRICS, load_metric\nprint(sorted(load_metric(name).name for name in METRICS))"
    )
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == str(sorted(METRICS))
