"""The two pipelines driven the way transformers users drive `pipeline(...)` objects: batch sizes and left-padding
tokenizers, streamed inputs (generators, `KeyDataset`), return shapes, transformers' text-classification options,
`max_length` per call, `dtype` and `device`, `num_workers`, and texts passed as keyword arguments.

Each case gets the result of scoring one input at a time (or of the float32 model) or one clear error naming the
argument.
"""

import math

import pytest
import torch
from datasets import Dataset, DatasetDict
from transformers import pipeline
from transformers.pipelines.pt_utils import KeyDataset

from pairzoo import create_model, load_tokenizer

OK = {"sentence1": "A man walks.", "sentence2": "A man runs.", "condition": "The activity."}
PAIR_OK = {"text": "A man walks.", "text_pair": "A man runs."}
# Inputs of very different lengths, so a batch pads most of them.
INPUTS = [
    OK,
    {**OK, "sentence1": "The quick brown fox jumps over the lazy dog near the old river bank. " * 4},
    {**OK, "sentence2": "x"},
    {**OK, "condition": "The colour of the clothing worn by every person in the picture."},
    {**OK, "sentence1": "Dogs.", "sentence2": "Two cats sleep on a very warm windowsill in the afternoon sun."},
]
PAIRS = [{"text": e["sentence1"], "text_pair": e["sentence2"]} for e in INPUTS]
MODELS = {  # key: (task, model name, overrides)
    "cross-encoder": ("conditional-similarity", "cross-encoder", {}),
    "csr-tri": ("conditional-similarity", "csr", {"architecture": "tri"}),
    "csr-bi": ("conditional-similarity", "csr", {"architecture": "bi"}),
    "siamese-matcher": (
        "pair-similarity",
        "siamese-matcher",
        {"hidden_size": 64, "max_sequence_length": 32, "sfa_reductions": [2, 2]},
    ),
    "neighbor-attention": (
        "pair-similarity",
        "neighbor-attention",
        {"neighbor_layers": [0], "num_candidates": 20, "num_neighbors": 4, "num_labels": 3},
    ),
}


def _model(key: str):
    _, name, overrides = MODELS[key]
    torch.manual_seed(0)
    return create_model(name, backbone="tiny-bert", **overrides).eval()


def _scorer(key: str, model=None, padding_side: str = "right", **kwargs):
    tokenizer = load_tokenizer("tiny-bert")
    tokenizer.padding_side = padding_side
    return pipeline(MODELS[key][0], model=model or _model(key), tokenizer=tokenizer, **kwargs)


def _inputs(key: str) -> list:
    return INPUTS if MODELS[key][0] == "conditional-similarity" else PAIRS


def _scores(results) -> list:
    return [r["score"] for r in results]


@pytest.fixture(scope="module")
def classifier():
    torch.manual_seed(0)
    return create_model("cross-encoder", backbone="tiny-bert", id2label={0: "neg", 1: "neu", 2: "pos"}).eval()


# ============================================================================ batch sizes, padding side, streams


@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("key", sorted(MODELS))
def test_batched_lists_and_streams_score_as_one_input_at_a_time(key, padding_side):
    """Lists in batches of 4 and of more than the inputs, generators and `KeyDataset`s in batches (streams go
    through transformers' iterator): each score and label is the one of the input alone, whatever side the
    tokenizer pads on."""
    scorer = _scorer(key, padding_side=padding_side)
    inputs = _inputs(key)
    alone = [scorer(example) for example in inputs]
    rows = Dataset.from_list([{"example": example} for example in inputs])
    for name, got in {
        "list-4": scorer(inputs, batch_size=4),
        "list-50": scorer(inputs, batch_size=50),
        "generator-4": list(scorer((example for example in inputs), batch_size=4)),
        "key-dataset-3": list(scorer(KeyDataset(rows, "example"), batch_size=3)),
        "key-dataset-1": list(scorer(KeyDataset(rows, "example"))),
    }.items():
        assert _scores(got) == pytest.approx(_scores(alone), abs=1e-5), name
        assert [r.get("label") for r in got] == [r.get("label") for r in alone], name


def test_one_dict_gives_a_dict_a_list_of_one_a_list_and_data_set_rows_stream():
    scorer = _scorer("cross-encoder")
    single = scorer(OK)
    assert isinstance(single, dict) and math.isfinite(single["score"])
    assert scorer([OK]) == [single] and scorer([OK], batch_size=4) == [single]
    rows = Dataset.from_list([{**example, "label": 2.5} for example in INPUTS])  # a data set's label is ignored
    expected = _scores(scorer(INPUTS))
    assert _scores(scorer(row for row in rows)) == pytest.approx(expected, abs=1e-6)
    assert _scores(scorer(list(rows), batch_size=2)) == pytest.approx(expected, abs=1e-5)
    with pytest.raises(ValueError, match="`inputs` is an empty dataset"):
        scorer(KeyDataset(rows.select([]), "sentence1"))


@pytest.mark.parametrize("batch_size", [1, 2])
def test_a_data_set_scores_as_its_rows_and_a_dataset_dict_is_refused_naming_its_splits(batch_size):
    """A 🤗 `datasets.Dataset` (or `IterableDataset`) given whole is streamed as its rows, in order; a
    `DatasetDict` (several splits, a dict) would be one input with unknown fields: refused, naming the splits."""
    scorer = _scorer("cross-encoder")
    rows = Dataset.from_list([{**example, "label": 2.5} for example in INPUTS])
    expected = _scores(scorer(INPUTS))
    assert _scores(scorer(rows, batch_size=batch_size)) == pytest.approx(expected, abs=1e-5)
    assert _scores(scorer(rows.to_iterable_dataset(), batch_size=batch_size)) == pytest.approx(expected, abs=1e-5)
    with pytest.raises(
        ValueError, match=r"DatasetDict of splits \['train', 'validation'\].*scorer\(data\['validation'\]\)"
    ):
        scorer(DatasetDict({"train": rows, "validation": rows}), batch_size=batch_size)
    with pytest.raises(ValueError, match="`inputs` is an empty dataset"):
        scorer(rows.select([]), batch_size=batch_size)


# ============================================================================ text-classification options


@pytest.mark.parametrize("task", ["conditional-similarity", "pair-similarity"])
@pytest.mark.parametrize(
    "option",
    [{"top_k": None}, {"top_k": 2}, {"function_to_apply": "none"}, {"function_to_apply": "softmax"},
     {"return_all_scores": True}, {"truncation": True}, {"padding": "longest"}],
    ids=lambda option: "-".join(f"{k}={v}" for k, v in option.items()),
)  # fmt: skip
def test_text_classification_options_are_refused_by_name_at_call_and_construction(classifier, task, option):
    tokenizer = load_tokenizer("tiny-bert")
    scorer = pipeline(task, model=classifier, tokenizer=tokenizer)
    example = {"sentence1": "The food was great.", "condition": "food"} if task != "pair-similarity" else PAIR_OK
    name = next(iter(option))
    with pytest.raises(ValueError, match=f"unknown argument `{name}` for the {task} pipeline"):
        scorer(example, **option)
    with pytest.raises(ValueError, match=f"unknown argument `{name}`"):
        scorer([example, example], batch_size=2, **option)
    with pytest.raises(ValueError, match=f"unknown argument `{name}`"):
        pipeline(task, model=classifier, tokenizer=tokenizer, **option)
    assert set(scorer(example)) == {"label", "score"}


# ============================================================================ max_length and the condition


def test_max_length_per_call_overrides_the_one_given_at_construction():
    scorer = _scorer("cross-encoder", max_length=16)
    widths = []
    forward = scorer._forward
    scorer._forward = lambda batch: widths.append(batch["input_ids"].shape[1]) or forward(batch)
    long_example = {**OK, "sentence1": "word " * 100}
    scorer(long_example, max_length=32)
    scorer([long_example, long_example], max_length=32, batch_size=2)
    scorer(long_example, max_length=None)  # None: the construction's value
    next(iter(scorer((example for example in [long_example, long_example]), max_length=24, batch_size=2)))
    assert widths == [32, 32, 16, 24]


@pytest.mark.parametrize("batch_size", [1, 2])
def test_a_condition_longer_than_max_length_is_an_error_naming_its_input(batch_size):
    """The condition is never truncated: an input whose condition leaves no room is refused, naming its position in
    the list (not its place in a length-sorted batch)."""
    scorer = _scorer("cross-encoder")
    inputs = [OK, {**OK, "condition": "word " * 40}, OK]
    with pytest.raises(ValueError, match=r"input 1 of 3: `condition`\[0\] has 40 tokens and cannot fit in max_length"):
        scorer(inputs, max_length=16, batch_size=batch_size)
    assert len(scorer(inputs, max_length=64, batch_size=batch_size)) == 3


@pytest.mark.parametrize("batch_size", [1, 2])
@pytest.mark.parametrize("stream", ["generator", "torch-dataset"])
def test_a_streamed_input_that_cannot_be_encoded_is_an_error_naming_its_position(stream, batch_size):
    scorer = _scorer("cross-encoder")
    inputs = [OK, {**OK, "condition": "word " * 40}, OK]
    streamed = (row for row in inputs) if stream == "generator" else Dataset.from_list(inputs)
    where = "input 1" if stream == "generator" else "input 1 of 3"
    with pytest.raises(ValueError, match=rf"^{where}: `condition`\[0\] has 40 tokens and cannot fit"):
        list(scorer(streamed, max_length=16, batch_size=batch_size))


# ============================================================================ dtype and device


@pytest.mark.parametrize("dtype", [torch.bfloat16, "bfloat16"])
@pytest.mark.parametrize("key", ["cross-encoder", "csr-tri", "siamese-matcher", "neighbor-attention"])
def test_dtype_casts_a_model_given_as_an_object_and_scores_close_to_float32(key, dtype):
    model = _model(key)
    inputs = _inputs(key)
    expected = _scorer(key, model=model, device="cpu")(inputs, batch_size=2)
    scorer = _scorer(key, model=model, device="cpu", dtype=dtype)
    assert scorer.model.dtype == torch.bfloat16 and model.dtype == torch.bfloat16
    got = scorer(inputs, batch_size=2)
    assert all(math.isfinite(s) for s in _scores(got))
    scale = max(1.0, max(abs(s) for s in _scores(expected)))
    assert _scores(got) == pytest.approx(_scores(expected), abs=5e-2 * scale)
    assert _scores(scorer(example) for example in inputs) == pytest.approx(_scores(got), abs=2e-2 * scale)


@pytest.mark.parametrize("dtype", [torch.int8, "int64", "half-ish", 16])
def test_a_dtype_that_is_no_floating_point_type_is_refused_by_name(dtype):
    model = _model("cross-encoder")
    with pytest.raises(ValueError, match="`dtype` must be a floating-point torch dtype"):
        _scorer("cross-encoder", model=model, dtype=dtype)
    assert model.dtype == torch.float32


# ============================================================================ other keyword arguments


@pytest.mark.parametrize("key", ["cross-encoder", "siamese-matcher"])
def test_texts_as_keyword_arguments_score_as_one_input_dict(key):
    scorer = _scorer(key)
    example = _inputs(key)[1]
    assert scorer(**example) == scorer(example)
    first = next(iter(example))
    with pytest.raises(ValueError, match=f"`{first}` is given as a keyword argument next to `inputs`"):
        scorer(example, **{first: "Another text."})
    missing = "`condition`" if key == "cross-encoder" else "`text_pair`"
    with pytest.raises(ValueError, match=f"missing {missing}"):
        scorer(**{first: "Only one text."})


@pytest.mark.parametrize("option", [{"batch_size": 0}, {"batch_size": "2"}, {"num_workers": -1}, {"num_workers": 1.5}])
def test_batching_options_are_checked_at_construction(option):
    (name,) = option
    with pytest.raises(ValueError, match=f"`{name}` must be a"):
        _scorer("cross-encoder", **option)


def test_num_workers_is_checked_and_changes_no_score():
    scorer = _scorer("cross-encoder")
    expected = _scores(scorer(INPUTS))
    assert _scores(scorer(INPUTS, num_workers=0, batch_size=2)) == pytest.approx(expected, abs=1e-5)
    for bad in (-1, "2", 1.5, True):
        for batch_size in (1, 2):
            with pytest.raises(ValueError, match="`num_workers` must be a non-negative integer"):
                scorer(INPUTS, num_workers=bad, batch_size=batch_size)
