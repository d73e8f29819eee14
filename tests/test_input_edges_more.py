"""More edges, where a plausible number would be the wrong one: metrics of small or odd evaluation sets, pipelines
over models left in training mode or with a config changed after the head was built, batches whose rows disagree,
and half-precision forward passes on CPU.

Each case gets the correct result (checked against scikit-learn, scipy or a float32 forward pass) or one clear
error naming the field.
"""

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import f1_score
from transformers import EvalPrediction, pipeline

from pairzoo import create_model, load_tokenizer
from pairzoo.metrics import load_metric
from pairzoo.training.collators import make_collator
from pairzoo.training.metrics import classification_metrics, compute_metrics_fn, regression_metrics

OK = {"sentence1": "A man walks.", "sentence2": "A man runs.", "condition": "The activity."}
LONG = {"sentence1": "The quick brown fox jumps over the lazy dog. " * 8, "sentence2": "A dog.", "condition": "Kind."}
COMATEFORMER = {"combined_layers": [0, 1], "combined_head_fraction": [0.5, 0.3]}


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny-bert")


# ============================================================================ metrics


def test_macro_f1_leaves_out_a_class_absent_from_labels_and_predictions():
    labels = np.array([0, 0, 1, 1, 0])
    logits = np.eye(3)[labels]  # perfect predictions; class 2 occurs nowhere
    got = classification_metrics(logits, labels, ["ENTAILMENT", "NEUTRAL", "CONTRADICTION"])
    assert got == {"accuracy": 100.0, "f1": 100.0}
    logits[0] = np.eye(3)[2]  # class 2 predicted once (wrongly): it now counts, with F1 0
    got = classification_metrics(logits, labels)
    expected = f1_score(labels, logits.argmax(-1), average="macro", labels=[0, 1, 2], zero_division=0)
    assert got["f1"] == pytest.approx(expected * 100) and got["accuracy"] == pytest.approx(80.0)


def test_binary_f1_of_a_positive_class_absent_from_labels_and_predictions_is_nan():
    got = classification_metrics(np.eye(2)[[0, 0, 0]], np.array([0, 0, 0]), ["0", "1"])
    assert got["accuracy"] == 100.0 and math.isnan(got["f1"])
    got = classification_metrics(np.eye(2)[[0, 1, 0]], np.array([0, 0, 0]), ["0", "1"])  # predicted once: F1 0
    assert got["f1"] == 0.0


def test_predicted_class_ids_above_every_label_still_count_as_classes():
    predictions, labels = np.array([0, 2, 1, 1]), np.array([0, 1, 1, 1])
    got = classification_metrics(predictions, labels)
    assert got["f1"] == pytest.approx(f1_score(labels, predictions, average="macro") * 100)


@pytest.mark.parametrize(
    ("logits", "labels", "names", "match"),
    [
        (np.eye(2)[[0, 1, 1]], [0, 1, 2], None, r"`labels` must be class indices in \[0, 2\), got \[2.0\]"),
        (np.eye(3)[[0, 1, 1]], [0, 1, 5], None, r"`labels` must be class indices in \[0, 3\), got \[5.0\]"),
        (np.eye(2)[[0, 1, 1]], [0, 1, -100], None, r"`labels` must be class indices in \[0, 2\)"),
        (np.eye(2)[[0, 1, 1]], [0.7, 1.2, 0.0], None, r"`labels` must be class indices.*got \[0.7, 1.2\]"),
        (np.eye(2)[[0, 1]], ["a", "b"], None, "`labels` must be class indices, got dtype"),
        (np.array([0, 3, 1]), [0, 1, 1], ["a", "b", "c"], r"`predictions` must be class indices in \[0, 3\)"),
        (np.eye(3)[[0, 1, 2]], [0, 1, 2], ["a", "b"], "`label_names` has 2 names but the logits have 3 classes"),
        (np.zeros((2, 3, 2)), [1, 0], None, r"need `logits` \(N, num_classes\) or \(N,\)"),
    ],
)
def test_class_ids_that_are_no_class_are_named_not_scored(logits, labels, names, match):
    with pytest.raises(ValueError, match=match):
        classification_metrics(logits, np.asarray(labels), names)


def test_compute_metrics_refuses_logits_of_another_width_than_num_labels():
    prediction = EvalPrediction(predictions=np.eye(2)[[0, 1]], label_ids=np.array([0, 1]))
    with pytest.raises(ValueError, match=r"expected \(N, num_labels=3\)"):
        compute_metrics_fn(3)(prediction)


def test_non_finite_class_scores_make_accuracy_and_f1_nan():
    logits = np.array([[np.nan, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    got = compute_metrics_fn(3)(EvalPrediction(predictions=(logits,), label_ids=np.array([0, 1, 0])))
    assert math.isnan(got["accuracy"]) and math.isnan(got["f1"])


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_a_non_finite_regression_prediction_makes_the_correlations_nan(bad):
    labels = np.array([1.0, 2.0, 3.0, 4.0])
    got = regression_metrics(np.array([1.0, bad, 3.0, 4.0]), labels)
    assert math.isnan(got["spearman"]) and math.isnan(got["pearson"])
    finite = regression_metrics(np.array([1.0, 2.5, 3.0, 4.0]), labels)
    assert finite["spearman"] == pytest.approx(100.0)


def test_the_classification_module_itself_applies_the_absent_class_rule():
    metric = load_metric("classification")
    got = metric.compute(predictions=[0, 1, 1], references=[0, 1, 1], average="macro", labels=[0, 1, 2, 3])
    assert got["f1"] == 100.0
    got = metric.compute(predictions=[0, 0], references=[0, 0], average="binary", pos_label=1)
    assert math.isnan(got["f1"])


# ============================================================================ pipelines


@pytest.mark.parametrize("name", ["cross-encoder", "csr", "seaver"])
def test_pipeline_scores_a_model_left_in_training_mode_without_dropout(tokenizer, name):
    torch.manual_seed(0)
    model = create_model(name, backbone="tiny-bert")
    model.backbone.embeddings.eval()  # a module the user put in eval mode stays so
    assert model.training
    scorer = pipeline("conditional-similarity", model=model, tokenizer=tokenizer)
    inputs = [OK, LONG, {**OK, "sentence1": "x"}]
    first = [r["score"] for r in scorer(inputs, batch_size=1)]
    batched = [r["score"] for r in scorer(inputs, batch_size=3)]
    assert batched == pytest.approx(first, abs=1e-5)
    assert [scorer(example)["score"] for example in inputs] == pytest.approx(first, abs=1e-5)
    assert model.training and model.backbone.encoder.training and not model.backbone.embeddings.training
    model.eval()
    with torch.no_grad():
        expected = model(**scorer.preprocess(LONG)).scores.item()
    assert first[1] == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize(("built", "changed"), [(1, 3), (3, 1), (3, 2)])
def test_pipeline_refuses_num_labels_changed_after_the_head_was_built(tokenizer, built, changed):
    model = create_model("cross-encoder", backbone="tiny-bert", num_labels=built).eval()
    if changed == 2:
        model.config.id2label = {0: "a", 1: "b"}  # transformers derives num_labels from id2label
    else:
        model.config.num_labels = changed
    scorer = pipeline("conditional-similarity", model=model, tokenizer=tokenizer)
    with pytest.raises(ValueError, match=f"config has num_labels={changed}: `num_labels` or `id2label` was changed"):
        scorer(OK)
    with pytest.raises(ValueError, match=f"num_labels={changed}"):
        scorer([OK, LONG], batch_size=2)


# ============================================================================ collators


ROW = {"sentence1": "a b", "sentence2": "c d", "condition": "e", "label": 3.0}


@pytest.mark.parametrize(
    "rows",
    [
        [{k: v for k, v in ROW.items() if k != "sentence2"}, ROW],  # row 1's sentence2 would be dropped
        [ROW, {k: v for k, v in ROW.items() if k != "sentence2"}],
        [{k: v for k, v in ROW.items() if k != "label"}, ROW],  # row 1's label would be dropped
        [ROW, {k: v for k, v in ROW.items() if k != "label"}],
        [{"input_ids": [101, 102], "attention_mask": [1, 1]}, {"input_ids": [101, 102], "attention_mask": [1, 1],
                                                                "token_type_ids": [0, 0]}],
    ],
)  # fmt: skip
def test_rows_of_a_batch_with_different_fields_are_refused_naming_the_row(tokenizer, rows):
    model = create_model("cross-encoder", backbone="tiny-bert")
    with pytest.raises(ValueError, match=r"row 1 of the batch has fields .* but row 0 has"):
        make_collator(model, tokenizer, 64, (1.0, 5.0))(rows)


def test_rows_with_an_extra_unused_column_still_collate(tokenizer):
    model = create_model("cross-encoder", backbone="tiny-bert")
    collator = make_collator(model, tokenizer, 64, (1.0, 5.0))
    plain = collator([ROW, {**ROW, "sentence1": "f"}])
    extra = collator([{**ROW, "idx": 0}, {**ROW, "sentence1": "f", "idx": 1}])
    assert plain.keys() == extra.keys() and all(torch.equal(plain[k], extra[k]) for k in plain)


def test_tokenized_rows_with_a_label_column_keep_their_labels(tokenizer):
    model = create_model("cross-encoder", backbone="tiny-bert", num_labels=3)
    collator = make_collator(model, tokenizer, 64)
    rows = [
        {"input_ids": [101, 1037, 102], "attention_mask": [1, 1, 1]},
        {"input_ids": [101, 102], "attention_mask": [1, 1]},
    ]
    with_label = collator([{**row, "label": i + 1} for i, row in enumerate(rows)])
    with_labels = collator([{**row, "labels": i + 1} for i, row in enumerate(rows)])
    assert with_label["labels"].tolist() == with_labels["labels"].tolist() == [1, 2]
    with pytest.raises(ValueError, match=r"`label`\[1\] = 7 is not a class index"):
        collator([{**row, "label": 7 * i} for i, row in enumerate(rows)])


@pytest.mark.parametrize(
    ("num_labels", "label", "match"),
    [
        (3, float("nan"), r"`label`\[0\] = nan is not a class index in \[0, 3\)"),
        (3, float("inf"), r"`label`\[0\] = inf is not a class index"),
        (3, np.True_, r"`label`\[0\] must be a number, got np.True_"),
        (1, np.True_, r"`label`\[0\] must be a number, got np.True_"),
        (1, [2.0], r"`label`\[0\] must be a number, got \[2.0\]"),
    ],
)
def test_labels_that_are_no_number_or_class_are_named(tokenizer, num_labels, label, match):
    model = create_model("cross-encoder", backbone="tiny-bert", num_labels=num_labels)
    with pytest.raises(ValueError, match=match):
        make_collator(model, tokenizer, 64)([{**ROW, "label": label}])


# ============================================================================ half precision on CPU


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("num_labels", [1, 3])
def test_comateformer_forward_in_half_precision_on_cpu_matches_float32(tokenizer, dtype, num_labels):
    torch.manual_seed(0)
    model = create_model("comateformer", backbone="tiny-bert", num_labels=num_labels, **COMATEFORMER).eval()
    rows = [{"sentence1": "A man walks his dog.", "sentence2": "Man."}, {"sentence1": "x", "sentence2": "A woman."}]
    batch = make_collator(model, tokenizer, 64)(rows)
    with torch.no_grad():
        expected = model(**batch).logits
        got = model.to(dtype)(**batch).logits
    assert got.dtype == dtype
    torch.testing.assert_close(got.float(), expected, atol=2e-2 * max(1.0, expected.abs().max().item()), rtol=0)


def test_pipeline_refuses_a_label_scale_inverted_after_the_model_was_built(tokenizer):
    model = create_model("cross-encoder", backbone="tiny-bert").eval()
    scorer = pipeline("conditional-similarity", model=model, tokenizer=tokenizer)
    model.config.label_min, model.config.label_max = 5.0, 1.0
    with pytest.raises(ValueError, match="`label_max` \\(1.0\\) must be greater than `label_min` \\(5.0\\)"):
        scorer(OK)


# ============================================================================ model labels


@pytest.mark.parametrize("name", ["cross-encoder", "csr", "seaver", "comateformer"])
def test_regression_labels_of_shape_batch_by_one_give_the_loss_of_flat_labels(tokenizer, name):
    overrides = COMATEFORMER if name == "comateformer" else {}
    model = create_model(name, backbone="tiny-bert", **overrides).eval()
    batch = make_collator(model, tokenizer, 64, (1.0, 5.0))([{**OK, "label": 2.0}, {**LONG, "label": 4.5}])
    labels = batch.pop("labels")
    with torch.no_grad():
        flat = model(**batch, labels=labels).loss
        column = model(**batch, labels=labels[:, None]).loss
    torch.testing.assert_close(column, flat)
    with pytest.raises(ValueError, match=r"`labels` has shape \(2, 2\); expected one label per row"):
        model(**batch, labels=labels[:, None].repeat(1, 2))


@pytest.mark.parametrize(
    ("labels", "match"),
    [
        (torch.tensor([0.7, 2.2]), "`labels` must be integer class indices for 3 classes, got dtype torch.float32"),
        (torch.eye(3)[[0, 2]], r"`labels` has shape \(2, 3\); expected one label per row"),  # one-hot targets
        (torch.tensor([True, False]), "must be integer class indices"),
    ],
)
@pytest.mark.parametrize("name", ["cross-encoder", "neighbor-attention"])
def test_class_labels_that_are_not_class_indices_are_refused(tokenizer, name, labels, match):
    overrides = {"neighbor_layers": [0]} if name == "neighbor-attention" else {}
    model = create_model(name, backbone="tiny-bert", num_labels=3, **overrides).eval()
    batch = make_collator(model, tokenizer, 64)([{**OK, "label": 0}, {**LONG, "label": 2}])
    batch.pop("labels")
    with pytest.raises(ValueError, match=match):
        model(**batch, labels=labels)


def test_a_multi_label_problem_type_is_refused_by_name():
    with pytest.raises(ValueError, match="`problem_type` must be one of"):
        create_model("cross-encoder", backbone="tiny-bert", num_labels=3, problem_type="multi_label_classification")
    model = create_model("cross-encoder", backbone="tiny-bert", num_labels=3)
    model.config.problem_type = "regression"
    with pytest.raises(ValueError, match="`problem_type` 'regression' does not fit `num_labels` = 3"):
        model.config.validate()


@pytest.mark.parametrize(
    ("names", "positive"),
    [
        (["duplicate", "not_duplicate"], 0),
        (["not_duplicate", "duplicate"], 1),
        (["yes", "no"], 0),
        (["Different", "same"], 1),
        (["entailment", "not_entailment"], 0),
        (["0", "1"], 1),
        (["cat", "dog"], 1),  # nothing says which: the second, and metrics.json names it (`f1_positive_class`)
    ],
)
def test_the_binary_f1_is_that_of_the_class_that_does_not_say_no(names, positive):
    from pairzoo.training.metrics import positive_class

    assert positive_class(names) == positive
    labels = np.array([0, 0, 1, 1, 1])
    predictions = np.array([0, 1, 1, 1, 0])
    expected = 100 * f1_score(labels, predictions, pos_label=positive)
    assert classification_metrics(np.eye(2)[predictions], labels, names)["f1"] == pytest.approx(expected)


def test_tokenize_dataset_refuses_class_names_in_another_order_than_the_models(tokenizer):
    from datasets import ClassLabel, Dataset, Features, Value

    from pairzoo.training import tokenize_dataset

    features = Features(
        {"sentence1": Value("string"), "sentence2": Value("string"), "label": ClassLabel(names=["yes", "no"])}
    )
    dataset = Dataset.from_dict(
        {"sentence1": ["a b", "c d"], "sentence2": ["e", "f"], "label": [0, 1]}, features=features
    )
    named = create_model(
        "cross-encoder", backbone="tiny-bert", id2label={0: "no", 1: "yes"}, label2id={"no": 0, "yes": 1}
    )
    with pytest.raises(ValueError, match=r"names its classes \['yes', 'no'\].*`id2label` is \['no', 'yes'\]"):
        tokenize_dataset(dataset, named, tokenizer, name="train")
    for model in (
        create_model(
            "cross-encoder", backbone="tiny-bert", id2label={0: "yes", 1: "no"}, label2id={"yes": 0, "no": 1}
        ),
        create_model("cross-encoder", backbone="tiny-bert", num_labels=2),  # unnamed classes take any names
    ):
        assert tokenize_dataset(dataset, model, tokenizer)["labels"] == [0, 1]


@pytest.mark.parametrize("name", ["cross-encoder", "csr"])
def test_half_precision_scores_are_mapped_to_the_label_scale_in_float32(tokenizer, name):
    model = create_model(name, backbone="tiny-bert").eval()
    batch = make_collator(model, tokenizer, 64)([OK, LONG])
    with torch.no_grad():
        half = model.to(torch.bfloat16)(**batch)
        double = model.to(torch.float64)(**batch)
    assert half.scores.dtype == torch.float32 and double.scores.dtype == torch.float64
    prediction = half.logits.squeeze(-1).double()
    expected = model.config.label_min + (model.config.label_max - model.config.label_min) * prediction
    torch.testing.assert_close(half.scores.double(), expected, atol=1e-6, rtol=0)
