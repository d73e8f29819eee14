"""The `pair-similarity` pipeline: `{"text", "text_pair"}` inputs for models trained on sentence pairs.

The input encoding follows the model's `input_format`, the same encoding its training collator uses: `cross`
(`[CLS] s1 SEP s2 SEP`, no condition), `pair` (the tokenizer's own pair encoding), `tri` (each sentence tokenised
alone) and `prompt` (neighbor attention's label-word prompt with a [MASK], built by `encode_neighbor_attention_inputs`
of the model's own modeling module). Hub exports ship this file next to `pipeline_conditional_similarity.py`.
"""

from typing import Any

import torch

from .pipeline_conditional_similarity import (
    ScoringPipeline,
    _resolve_max_length,
    check_input_fields,
    encode_conditional_inputs,
    encode_pair_inputs,
    encode_tri_inputs,
)


def encode_prompt_inputs(
    model, tokenizer, text: "list[str]", text_pair: "list[str]", max_length: "int | None" = None
) -> "dict[str, torch.Tensor]":
    """Neighbor attention's prompt inputs of a batch of pairs, with the label words and prompt options of
    `model.config`.

    `max_length` defaults to the tokenizer's limit (`default_max_length`). The encoding lives with the model
    (`encode_neighbor_attention_inputs` and `resolve_label_words` of the module that defines its class), so an export
    uses its own copy and this file needs no import of a modeling file.
    """
    # The module that defined the model's class (already imported; the builtin keeps exported code import-free).
    module = __import__(type(model).__module__, fromlist=["encode_neighbor_attention_inputs"])
    config = model.config
    return module.encode_neighbor_attention_inputs(
        tokenizer,
        text,
        text_pair,
        label_words=module.resolve_label_words(config),
        max_length=_resolve_max_length(tokenizer, max_length),
        connecting_tokens=config.connecting_tokens,
        prompt_format=config.prompt_format,
    )


class PairSimilarityPipeline(ScoringPipeline):
    """`pipeline("pair-similarity")`: dicts with `text` and `text_pair` (the keys of transformers'
    `text-classification` pairs) -> scores, for every pairzoo model trained on a sentence-pair task.

    Regression models return `{"score": s}` on the label scale the model was trained on (`config.label_min` to
    `config.label_max`, e.g. 0-5 for STS-B); classification models return `{"label": name, "score": probability}`. Each
    text must be a string with a visible character; a `label` key (a data set row's) is ignored whatever its value,
    and any other key is an error.
    """

    task_name = "pair-similarity"
    text_fields = ("text", "text_pair")

    def check_example(self, inputs: Any) -> None:
        check_input_fields(inputs, ("text", "text_pair"), (), self.task_name)
        input_format = getattr(self.model, "input_format", "cross")
        if input_format not in _PAIR_ENCODERS:
            raise ValueError(
                f"{type(self.model).__name__} (input_format {input_format!r}) does not score plain sentence pairs; "
                f"known: {', '.join(repr(name) for name in _PAIR_ENCODERS)}."
            )

    def encode(self, examples: "list[dict]", max_length: "int | None" = None) -> "dict[str, torch.Tensor]":
        text, text_pair = ([e[field] for e in examples] for field in ("text", "text_pair"))
        input_format = getattr(self.model, "input_format", "cross")
        if input_format == "prompt":
            return encode_prompt_inputs(self.model, self.tokenizer, text, text_pair, max_length=max_length)
        return _PAIR_ENCODERS[input_format](self.tokenizer, text, text_pair, max_length=max_length)

    def text_segments(self, examples: "list[dict]") -> "dict[str, tuple[str | None, ...]]":
        input_format = getattr(self.model, "input_format", "cross")
        if input_format == "tri":
            return {"input_ids": ("text",), "input_ids_2": ("text_pair",)}
        if input_format == "prompt":  # the label-word prompt comes first
            return {"input_ids": (None, "text", "text_pair")}
        return {"input_ids": ("text", "text_pair")}


# The encoding of each `input_format` for a sentence pair (`prompt` needs the model: `encode_prompt_inputs`).
_PAIR_ENCODERS = {
    "cross": encode_conditional_inputs,
    "pair": encode_pair_inputs,
    "tri": encode_tri_inputs,
    "prompt": None,
}
