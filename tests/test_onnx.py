"""Every family exported to ONNX, with torch's TorchScript exporter (`dynamo=False`) and with its default one
(`torch.export`), and run by ONNX Runtime, scores inputs of other batch sizes and lengths than the traced ones as the
model does."""

import warnings

import onnxruntime
import pytest
import torch
from architecture_cells import FAMILIES, pipeline_examples, tokenizer_of
from transformers import pipeline

from pairzoo import create_model, get_model_spec
from pairzoo.modeling.modeling_comateformer import pairwise_l1

OTHER_ROWS = [  # longer and more rows than `pipeline_examples`, so no traced shape is reused
    {
        "sentence1": "A very long sentence about a man who walks his small dog along the river every single morning.",
        "sentence2": "Someone walks.",
        "condition": "The number of animals mentioned in the text.",
    },
    {"sentence1": "Hi.", "sentence2": "Hello there, how are you doing today my friend?", "condition": "Tone."},
    {"sentence1": "Cats.", "sentence2": "Dogs.", "condition": "Animal."},
]


class _Logits(torch.nn.Module):
    """The model's logits from its inputs given by position in `names` order (ONNX inputs are positional)."""

    def __init__(self, model: torch.nn.Module, names: "list[str]") -> None:
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.model(**dict(zip(self.names, inputs))).logits


def _model_and_inputs(family: str) -> "tuple[torch.nn.Module, dict, dict]":
    """The family's tiny-bert model, and its pipeline's encoding of the examples to trace and of `OTHER_ROWS`."""
    spec = FAMILIES[family]
    torch.manual_seed(0)
    model = create_model(spec.model, backbone="tiny-bert", **spec.overrides).eval()
    pipeline_task = get_model_spec(spec.model).entry_points(spec.task)[1]
    scorer = pipeline(pipeline_task, model=model, tokenizer=tokenizer_of("tiny-bert"))
    other = OTHER_ROWS
    if pipeline_task == "pair-similarity":
        other = [{"text": row["sentence1"], "text_pair": row["sentence2"]} for row in OTHER_ROWS]
    traced, scored = scorer.encode(pipeline_examples(pipeline_task)), scorer.encode(other)
    return model, traced, scored


@pytest.mark.parametrize("family", list(FAMILIES))
def test_an_onnx_export_scores_other_shapes_as_the_model(family, tmp_path):
    model, traced, scored = _model_and_inputs(family)
    names = list(traced)
    axes = {name: {0: "batch", 1: f"length_{name}"} if traced[name].dim() == 2 else {0: "batch"} for name in names}
    path = tmp_path / "model.onnx"
    wrapper = _Logits(model, names).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer warnings
        torch.onnx.export(wrapper, tuple(traced[n] for n in names), str(path), input_names=names,
                          output_names=["logits"], dynamic_axes=axes, opset_version=17, dynamo=False)  # fmt: skip
    assert all(scored[n].shape != traced[n].shape for n in names if traced[n].dim() == 2)  # no traced shape reused
    session = onnxruntime.InferenceSession(str(path))
    (logits,) = session.run(None, {name: scored[name].numpy() for name in names})
    with torch.no_grad():
        expected = wrapper(*(scored[n] for n in names))
    torch.testing.assert_close(torch.from_numpy(logits), expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_default_onnx_exporter_scores_other_shapes_as_the_model(family, tmp_path):
    """torch's default exporter (`dynamo=True`, through `torch.export`), the model called with its keyword inputs:
    batch size and lengths free, except where an RNN runs (the Siamese matcher's SFA blocks), which `torch.export`
    unrolls over the traced length: there the length is fixed and the batch size free."""
    model, traced, scored = _model_and_inputs(family)
    recurrent = any(isinstance(module, torch.nn.RNNBase) for module in model.modules())
    if recurrent:  # the traced rows twice, the second time in reverse order: the same lengths, another batch size
        scored = {name: torch.cat([tensor, tensor.flip(0)]) for name, tensor in traced.items()}
    length = torch.export.Dim.STATIC if recurrent else torch.export.Dim.DYNAMIC
    shapes = {
        name: {0: torch.export.Dim.DYNAMIC, 1: length} if tensor.dim() == 2 else {0: torch.export.Dim.DYNAMIC}
        for name, tensor in traced.items()
    }
    path = tmp_path / "model.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (), str(path), kwargs=dict(traced), dynamic_shapes=shapes, dynamo=True, verbose=False)
    session = onnxruntime.InferenceSession(str(path))
    logits = session.run(None, {i.name: scored[i.name].numpy() for i in session.get_inputs()})[0]
    with torch.no_grad():
        expected = model(**scored).logits
    torch.testing.assert_close(torch.from_numpy(logits), expected, atol=1e-5, rtol=1e-4)


def test_pairwise_l1_under_onnx_export_is_the_cdist_it_replaces(monkeypatch):
    """Comateformer's N term: torch's ONNX export of `cdist(p=1)` computes NaN in ONNX Runtime, so export uses the
    explicit sum, which must equal cdist."""
    query, key = torch.randn(2, 3, 5, 8, dtype=torch.float64), torch.randn(2, 3, 7, 8, dtype=torch.float64)
    expected = pairwise_l1(query, key)
    monkeypatch.setattr(torch.onnx, "is_in_onnx_export", lambda: True)
    torch.testing.assert_close(pairwise_l1(query, key), expected, atol=1e-12, rtol=0)
