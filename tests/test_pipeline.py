"""Input encoding (truncation rules, span masks, errors) and the `conditional-similarity` pipeline."""

import pytest
import torch
from transformers import pipeline

from pairzoo import create_model, encode_conditional_inputs, load_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny-bert")


def test_layout_matches_the_csts_reference(tokenizer):
    """`[CLS] s1 [SEP] s2 [SEP] c [SEP]`: the same ids as tokenizing 's1 [SEP] s2 [SEP] c' as one sequence."""
    s1, s2, c = "A man is walking.", "A man runs fast.", "The speed."
    ours = encode_conditional_inputs(tokenizer, s1, s2, c)["input_ids"][0].tolist()
    reference = tokenizer(" ".join([s1, tokenizer.sep_token, s2, tokenizer.sep_token, c]))["input_ids"]
    assert ours == reference


def test_truncates_sentences_never_the_condition(tokenizer):
    long = "word " * 200
    enc = encode_conditional_inputs(
        tokenizer,
        [long, "short"],
        [long, "tiny"],
        ["The colour of the clothing.", "x"],
        max_length=32,
        return_span_masks=True,
    )
    assert enc["input_ids"].shape[1] == 32
    condition_ids = tokenizer(" The colour of the clothing.", add_special_tokens=False)["input_ids"]
    row = enc["input_ids"][0][enc["condition_mask"][0].bool()].tolist()
    assert row == condition_ids + [tokenizer.sep_token_id]
    assert (enc["sentence_mask"] & enc["condition_mask"]).sum() == 0
    assert torch.equal(enc["sentence_mask"] | enc["condition_mask"], enc["attention_mask"])


def test_condition_that_cannot_fit_is_an_error(tokenizer):
    with pytest.raises(ValueError, match=r"`condition`\[0\].*cannot fit"):
        encode_conditional_inputs(tokenizer, "a b", "c d", "word " * 40, max_length=32)


@pytest.mark.parametrize(
    "args, message",
    [
        (("", "b", "c"), r"`sentence1`\[0\] is empty"),
        (("a", "   ", "c"), r"`sentence2`\[0\] is empty"),
        (("a", "b", ""), r"`condition`\[0\] is empty"),
        ((None, "b", "c"), "`sentence1` is required"),
        ((["a", "b"], ["c"], ["d", "e"]), "`sentence2` has 1 items"),
        (([3], ["b"], ["c"]), r"`sentence1`\[0\] must be a string"),
    ],
)
def test_bad_inputs_name_the_field(tokenizer, args, message):
    with pytest.raises(ValueError, match=message):
        encode_conditional_inputs(tokenizer, *args)


def test_pipeline_scores_dicts_and_lists(tokenizer):
    model = create_model("cross-encoder", backbone="tiny-bert").eval()
    scorer = pipeline("conditional-similarity", model=model, tokenizer=tokenizer)
    example = {"sentence1": "A man walks.", "sentence2": "A man runs.", "condition": "The activity."}
    single = scorer(example)
    batch = scorer([example, {**example, "condition": "The number of people."}])
    assert isinstance(single["score"], float) and len(batch) == 2
    with torch.no_grad():
        direct = model(**encode_conditional_inputs(tokenizer, "A man walks.", "A man runs.", "The activity.")).scores
    assert single["score"] == pytest.approx(float(direct[0]), abs=1e-6)
    assert batch[0]["score"] == pytest.approx(single["score"], abs=1e-6)


def test_pipeline_classification_returns_label(tokenizer):
    model = create_model("cross-encoder", backbone="tiny-bert", id2label={0: "neg", 1: "neu", 2: "pos"}).eval()
    scorer = pipeline("conditional-similarity", model=model, tokenizer=tokenizer)
    out = scorer({"sentence1": "The food was great.", "condition": "food"})
    assert out["label"] in {"neg", "neu", "pos"} and 0 < out["score"] <= 1


def test_pipeline_rejects_bad_inputs(tokenizer):
    model = create_model("cross-encoder", backbone="tiny-bert").eval()
    scorer = pipeline("conditional-similarity", model=model, tokenizer=tokenizer)
    with pytest.raises(ValueError, match="missing `condition`"):
        scorer({"sentence1": "a", "sentence2": "b"})
    with pytest.raises(ValueError, match="must be dicts"):
        scorer("just a string")


PAIR_MODELS = {
    "cross-encoder": {},
    "comateformer": {"combined_layers": [0, 1], "combined_head_fraction": [0.5, 0.3]},
    "siamese-matcher": {"hidden_size": 64, "max_sequence_length": 32, "sfa_reductions": [2, 2]},
    "neighbor-attention": {"neighbor_layers": [0], "num_candidates": 20, "num_neighbors": 4, "num_labels": 3},
}


@pytest.mark.parametrize("name", sorted(PAIR_MODELS))
def test_pair_pipeline_encodes_a_pair_as_the_training_collator_does(tokenizer, name):
    """The `pair-similarity` pipeline feeds the model the token sequences it was trained on, for every input format
    (cross `[CLS] s1 SEP s2 SEP`, the tokenizer's pair encoding, each sentence alone, neighbor attention's prompt)."""
    from pairzoo.training.collators import make_collator

    model = create_model(name, backbone="tiny-bert", **PAIR_MODELS[name]).eval()
    scorer = pipeline("pair-similarity", model=model, tokenizer=tokenizer)
    row = {"sentence1": "Two women are walking in a park.", "sentence2": "A man runs."}
    trained = make_collator(model, tokenizer, max_length=64)([row])
    served = scorer.preprocess({"text": row["sentence1"], "text_pair": row["sentence2"]}, max_length=64)
    assert served.keys() == trained.keys(), name
    for key in trained:
        assert torch.equal(served[key], trained[key]), (name, key)


def test_batched_scoring_groups_inputs_with_and_without_sentence2(tokenizer):
    """A batch mixing conditional pairs and single sentences with a condition: each kind is encoded with its own
    layout, one forward pass per group, outputs in the input order and equal to one-by-one scoring."""
    model = create_model("cross-encoder", backbone="tiny-bert").eval()
    scorer = pipeline("conditional-similarity", model=model, tokenizer=tokenizer)
    inputs = [
        {"sentence1": "A man walks his dog in the park.", "sentence2": "A man runs.", "condition": "The activity."},
        {"sentence1": "The food was great.", "condition": "food"},
        {"sentence1": "Two kids.", "sentence2": "A child plays with a red ball.", "condition": "The number."},
        {"sentence1": "The service was slow and the waiter rude.", "condition": "service"},
    ]
    calls = []
    forward = scorer._forward
    scorer._forward = lambda batch: calls.append(batch["input_ids"].shape[0]) or forward(batch)
    batched = scorer(inputs, batch_size=8)
    assert sorted(calls) == [2, 2]
    for result, example in zip(batched, inputs):
        assert result["score"] == pytest.approx(scorer(example)["score"], abs=1e-5)
