"""`benchmarks/probe_mask.py` (the [MASK]-state diagnostic): runs end to end on tiny BERT, extracts the frozen
backbone's label-[MASK], mean and [CLS] states exactly, and refuses bad flags naming them."""

import itertools
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from test_adapt_mlm import _backbone, _sick

from pairzoo import create_model, load_tokenizer
from pairzoo.adapt_mlm import ADAPTATION_FILE
from pairzoo.modeling.modeling_neighbor_attention import encode_neighbor_attention_inputs
from pairzoo.training.data import SICK_E_LABELS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import probe_mask  # noqa: E402

ID2LABEL = dict(enumerate(SICK_E_LABELS))
LABEL_WORDS = ["entailment", "neutral", "contradiction"]


def _check_result(result: dict, train_rows: int, validation_rows: int) -> None:
    assert result["dataset"] == "sick-e" and result["label_words"] == LABEL_WORDS
    assert (result["train_rows"], result["validation_rows"]) == (train_rows, validation_rows)
    assert result["majority_class"] in SICK_E_LABELS and 0 <= result["majority_accuracy"] <= 100
    assert sorted(result["features"]) == ["cls", "mask", "mean"]
    for values in result["features"].values():
        assert set(values) == {"accuracy", "alpha", "mean_pairwise_cosine", "spread"}
        assert 0 <= values["accuracy"] <= 100 and values["alpha"] in probe_mask.ALPHAS
        assert -1 <= values["mean_pairwise_cosine"] <= 1 and values["spread"] > 0
    assert [(h["learning_rate"], h["standardised"]) for h in result["head"]] == [
        (1e-3, False),
        (1e-3, True),
        (1e-2, False),
        (1e-2, True),
    ]
    for head in result["head"]:
        assert 0 <= head["accuracy"] <= 100 and sum(head["predicted_counts"]) == validation_rows
    assert result["elapsed_seconds"] > 0


def test_runs_end_to_end_and_writes_the_printed_json(tmp_path, capsys):
    data = _sick(tmp_path, 13, heldout_pairs=4)
    output = tmp_path / "out" / "probe.json"
    argv = ["--backbone", "tiny-bert", "--data_dir", str(data), "--batch_size", "5", "--max_length", "48"]
    result = probe_mask.main([*argv, "--output", str(output)])
    _check_result(result, 13, 4)
    assert json.loads(output.read_text()) == result == json.loads(capsys.readouterr().out)
    assert not result["adapted"] and not result["mlm_head_weights"]
    # train labels 0, 1, 2, 0, ..., 0 (class 0 most frequent); validation pairs 100, 102, 104, 106: labels 1, 0, 2, 1
    assert result["majority_class"] == "ENTAILMENT" and result["majority_accuracy"] == 25.0
    capped = probe_mask.main([*argv, "--max_train_rows", "9", "--max_eval_rows", "3"])
    _check_result(capped, 9, 3)


def test_an_adapted_backbone_folder_is_recorded(tmp_path):
    data, folder = _sick(tmp_path, 12, heldout_pairs=3), _backbone(tmp_path / "backbone", with_head=True)
    (folder / ADAPTATION_FILE).write_text("{}")
    result = probe_mask.main(["--backbone", str(folder), "--data_dir", str(data), "--max_length", "48"])
    _check_result(result, 12, 3)
    assert result["adapted"] and result["mlm_head_weights"]


def test_features_are_the_frozen_encoders_states_at_the_label_mask():
    model = create_model("neighbor-attention", backbone="tiny-bert", id2label=ID2LABEL)
    tokenizer = load_tokenizer("tiny-bert")
    texts = [
        ("A man walks.", "A dog runs in the park after a red ball thrown by a child."),
        ("Two women in red jackets are walking their dogs through a park in the early morning fog.", "Cats."),
        ("A man is playing a guitar.", "A man plays an instrument."),
        ("Nobody is here.", "A crowd of people is watching the dancers on the stage of the old theatre."),
        ("A boy eats.", "A girl sleeps."),
    ]
    rows = [{"sentence1": a, "sentence2": b, "label": i % 3} for i, (a, b) in enumerate(texts)]
    features = probe_mask.extract_features(model, tokenizer, rows, batch_size=2, max_length=64)
    assert features["mask"].shape == features["mean"].shape == features["cls"].shape == (5, 32)
    assert features["labels"].tolist() == [0, 1, 2, 0, 1]
    # the reference: the model's own forward without neighbor attention on the same encoder weights, one unpadded row
    reference = create_model("neighbor-attention", backbone="tiny-bert", id2label=ID2LABEL, training_mode="full")
    reference.backbone.load_state_dict(model.backbone.state_dict())
    reference.eval()
    lengths = []
    for i in range(len(rows)):
        inputs = encode_neighbor_attention_inputs(tokenizer, [texts[i][0]], [texts[i][1]], LABEL_WORDS, 64)
        lengths.append(inputs["input_ids"].shape[1])
        with torch.no_grad():
            output = reference(**inputs, output_internals=True)
        hidden = output.last_hidden_state[0]
        close = {"rtol": 1e-4, "atol": 1e-5}
        torch.testing.assert_close(torch.from_numpy(features["mask"][i]), output.mask_hidden_state[0], **close)
        torch.testing.assert_close(torch.from_numpy(features["mean"][i]), hidden.mean(0), **close)
        torch.testing.assert_close(torch.from_numpy(features["cls"][i]), hidden[0], **close)
        # the label [MASK], not the connecting [MASK]' at position 1 (also a mask token)
        assert inputs["input_ids"][0, 1] == tokenizer.mask_token_id
        assert not torch.allclose(torch.from_numpy(features["mask"][i]), hidden[1], atol=1e-3)
    assert lengths[0] != lengths[1] and lengths[2] != lengths[3]  # each batch of 2 had padding


def test_geometry_matches_a_pair_by_pair_recomputation():
    states = np.random.default_rng(0).normal(1.0, 0.5, size=(7, 5)).astype(np.float32)
    pairs = [
        a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
        for a, b in itertools.permutations(states.astype(np.float64), 2)
    ]
    center = states.mean(0)
    spread = np.mean([np.linalg.norm(h - center) / np.linalg.norm(center) for h in states])
    geometry = probe_mask.state_geometry(states)
    assert geometry["mean_pairwise_cosine"] == pytest.approx(np.mean(pairs), rel=1e-6)
    assert geometry["spread"] == pytest.approx(spread, rel=1e-5)
    assert probe_mask.state_geometry(states[:1])["mean_pairwise_cosine"] is None


def test_ridge_probe_reads_a_class_the_features_hold():
    rng = np.random.default_rng(0)
    labels = np.arange(60) % 3
    features = rng.normal(100.0, 10.0, size=(60, 8))  # far from standardised: the scaler must map both splits
    features[np.arange(60), labels] += 40.0  # class c lifts dimension c of eight
    result = probe_mask.ridge_probe(features[:45], labels[:45], features[45:], labels[45:])
    assert result["accuracy"] == 100.0 and result["alpha"] in probe_mask.ALPHAS
    shuffled = probe_mask.ridge_probe(features[:45], rng.permutation(labels[:45]), features[45:], labels[45:])
    assert shuffled["accuracy"] < 80


def test_the_head_learns_from_standardised_features_where_a_shared_offset_stalls_it():
    rng = np.random.default_rng(0)
    labels = np.arange(240) % 3
    features = rng.normal(0.0, 1.0, size=(240, 16)) * 0.3 + 30.0  # a large component every example shares
    features[np.arange(240), labels] += 1.0  # class c lifts dimension c a little
    raw = probe_mask.train_head(features[:180], labels[:180], features[180:], labels[180:], 1e-2, 5, False)
    standardised = probe_mask.train_head(features[:180], labels[:180], features[180:], labels[180:], 1e-2, 5, True)
    assert standardised["accuracy"] >= 85 and raw["accuracy"] <= 50
    assert sum(raw["predicted_counts"]) == sum(standardised["predicted_counts"]) == 60


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--max_train_rows", "0"], "--max_train_rows"),
        (["--max_eval_rows", "-1"], "--max_eval_rows"),
        (["--batch_size", "0"], "--batch_size"),
        (["--max_length", "0"], "--max_length"),
        (["--head_epochs", "0"], "--head_epochs"),
        (["--head_learning_rates", "0.01", "0"], "--head_learning_rates"),
        (["--dataset", "stsb"], "--dataset stsb"),
        (["--dataset", "synthetic"], "--dataset synthetic"),
        (["--dataset", "wn18rr"], "--dataset wn18rr"),
    ],
)
def test_bad_flags_are_value_errors_naming_the_flag(tmp_path, argv, flag):
    output = tmp_path / "probe.json"
    with pytest.raises(ValueError, match=flag):
        probe_mask.main(["--backbone", "tiny-bert", "--output", str(output), *argv])
    assert not output.exists()


def test_a_one_class_train_sample_asks_for_more_rows(tmp_path):
    data = _sick(tmp_path, 12)
    with pytest.raises(ValueError, match="--max_train_rows"):
        probe_mask.main(["--backbone", "tiny-bert", "--data_dir", str(data), "--max_train_rows", "1"])
