"""The synthetic conditional-similarity generator: deterministic, C-STS schema, condition-dependent labels."""

from collections import defaultdict

import pytest
from scipy.stats import spearmanr

from pairzoo.training.synthetic import generate_examples, make_synthetic_dataset


def test_deterministic_by_seed_and_seed_sensitive():
    assert generate_examples(50, seed=3) == generate_examples(50, seed=3)
    assert generate_examples(50, seed=3) != generate_examples(50, seed=4)


def test_schema_and_label_range():
    data = make_synthetic_dataset(100, 20, 20, seed=0)
    assert set(data) == {"train", "validation", "test"}
    assert data["train"].column_names == ["sentence1", "sentence2", "condition", "label"]
    assert all(1.0 <= y <= 5.0 for y in data["train"]["label"])
    assert data["train"]["sentence1"] != data["validation"]["sentence1"]


def test_same_pair_gets_different_labels_under_different_conditions():
    labels = defaultdict(set)
    for ex in generate_examples(400, seed=0):
        labels[(ex["sentence1"], ex["sentence2"])].add(ex["label"])
    assert all(len(v) >= 2 for v in labels.values()), "every pair must be ambiguous without its condition"


def test_condition_blind_predictor_cannot_score_well():
    """The best condition-blind predictor (the mean label of each pair) has a low Spearman correlation."""
    examples = generate_examples(2000, seed=0)
    by_pair = defaultdict(list)
    for ex in examples:
        by_pair[(ex["sentence1"], ex["sentence2"])].append(ex["label"])
    blind = [sum(by_pair[(e["sentence1"], e["sentence2"])]) / 2 for e in examples]
    rho = spearmanr(blind, [e["label"] for e in examples]).statistic
    assert rho < 0.3, rho  # a condition-aware oracle scores 1.0


def test_bad_size():
    with pytest.raises(ValueError, match="`n`"):
        generate_examples(0)
