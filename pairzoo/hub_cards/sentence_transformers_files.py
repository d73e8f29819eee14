"""The sentence-transformers files of an export, so that it loads where pairzoo is not installed with

- `CrossEncoder(folder, trust_remote_code=True)` for every family that scores a text pair (cross-encoder, SEAVER,
  Comateformer, the Siamese matcher, neighbor attention): `predict` and `rank` return what pairzoo's pipeline returns
  as `score` (the label scale of a regression model; the class probabilities, in `id2label` order, of a classifier);
- `SentenceTransformer(folder, trust_remote_code=True)` for CSR, which embeds each sentence under a condition:
  `encode(sentences, prompt=condition)` gives the conditioned embeddings pairzoo's pipeline compares, and pairzoo's
  score is `label_min + (label_max - label_min) * model.similarity(a, b)` (cosine similarity). A CSR export cannot be
  a `CrossEncoder`: a folder holds one sentence-transformers model (`modules.json`), and CSR's is the embedder.

The input module (`sentence_transformers_modules.py`, generated from the package file of that name) encodes inputs
with the pipelines' own encoders, so the token ids are pairzoo's for every input format (which follow the tokenizer's
own pair template: `<s> a </s></s> b </s>` on RoBERTa). Conditions: a model trained with a condition takes it as the
last text of each input (`(sentence1, sentence2, condition)`, or `(sentence1, (sentence2, condition))` as the two
columns of sentence-transformers' cross-encoder losses; `(sentence1, condition)` for conditional classification) or
once for all inputs as `prompt=` (the trainers' `prompts=`).

Fine-tuning with sentence-transformers' trainers keeps pairzoo's scale with the losses the module's docstring names:
`MSELoss` on labels on the label scale for a `CrossEncoder` regressor (whose `BinaryCrossEntropyLoss`, the trainer's
default, is a ValueError: it would train the scores toward another scale than the one they are read on), the default
`CrossEntropyLoss` for a classifier (which gets the class logits), `CosineSimilarityLoss` on labels scaled to [0, 1]
for CSR.

`modules.json` and `config_sentence_transformers.json` are sentence-transformers' own formats;
`sentence_bert_config.json` sets the module's `transformer_task` (the Auto class of the pipeline: `AutoModel` or
`AutoModelForSequenceClassification`) and, for a `CrossEncoder`, `config_kwargs.num_labels`: without it
sentence-transformers resets `num_labels` to 1 when loading a sequence classifier whose `architectures` do not end in
`ForSequenceClassification` (`CrossEncoderForConditionalSimilarity`), and a 3-class export fails to load with a size
mismatch of the head.
"""

import inspect
import json
from pathlib import Path

from transformers import PreTrainedModel

from ..pipelines import PIPELINES, ConditionalSimilarityPipeline, PairSimilarityPipeline
from ..registry import pipeline_task_for, spec_for_model
from .codegen import inline_module, remote_code_files

MODULE_SOURCE = Path(__file__).with_name("sentence_transformers_modules.py")
MODULE_FILE = MODULE_SOURCE.name
# The sentence-transformers release the input modules are written against (its `base.modules.Transformer`).
REQUIREMENTS = {"sentence-transformers": ">=6.2"}
IDENTITY = "torch.nn.modules.linear.Identity"
_TRANSFORMER_TASKS = {
    "AutoModel": "feature-extraction",
    "AutoModelForSequenceClassification": "sequence-classification",
}


def input_fields(model: PreTrainedModel, task: "str | None" = None) -> "list[str]":
    """The texts of one sentence-transformers input of `model` trained on task kind `task` (default: its registry
    task), in order; a trailing `condition` may be given as `prompt=` instead."""
    spec = spec_for_model(model)
    task = task or spec.task
    if spec.embeds_sentences:
        return ["sentence", "condition"]
    if pipeline_task_for(task) == PairSimilarityPipeline.task_name:
        return ["text", "text_pair"]
    if task == "conditional-classification":
        return ["sentence1", "condition"]
    return ["sentence1", "sentence2", "condition"]


def sentence_transformers_files(model: PreTrainedModel, task: "str | None" = None) -> "dict[str, str]":
    """`{filename: text}` of the sentence-transformers files of an export of `model` trained on task kind `task`
    (default: its registry task; one it does not train on is a ValueError): `modules.json`,
    `sentence_bert_config.json`, `config_sentence_transformers.json`, the generated input-module file and the
    pipeline files it imports."""
    spec = spec_for_model(model)
    _, pipeline_task = spec.entry_points(task)
    embedder = spec.embeds_sentences
    module_config = {
        "transformer_task": _TRANSFORMER_TASKS[PIPELINES[pipeline_task][1]],
        "pipeline_task": pipeline_task,
        "input_fields": input_fields(model, task),
    }
    if embedder:
        module_config["modality_config"] = {"text": {"method": "forward", "method_output_name": "embeddings"}}
        module_config["module_output_name"] = "sentence_embedding"
        st_config = {"model_type": "SentenceTransformer", "similarity_fn_name": "cosine"}
    else:
        output = "scores" if model.config.num_labels == 1 else "logits"
        module_config["modality_config"] = {"text": {"method": "forward", "method_output_name": output}}
        module_config["module_output_name"] = "scores"
        module_config["config_kwargs"] = {"num_labels": model.config.num_labels}
        st_config = {"model_type": "CrossEncoder", "activation_fn": IDENTITY}
    st_config.update({"prompts": {}, "default_prompt_name": None, "requirements": REQUIREMENTS})
    module_class = "PairzooEmbedder" if embedder else "PairzooScorer"
    modules = [{"idx": 0, "name": "0", "path": "", "type": f"{MODULE_SOURCE.stem}.{module_class}"}]
    pipelines = (ConditionalSimilarityPipeline, PairSimilarityPipeline)
    pipeline_modules = [Path(inspect.getsourcefile(cls)).stem for cls in pipelines]
    generated = remote_code_files(spec.config_class, spec.model_class, *pipelines)
    files = {f"{name}.py": generated[f"{name}.py"] for name in pipeline_modules}
    files[MODULE_FILE] = inline_module(MODULE_SOURCE, {f"..pipelines.{name}": name for name in pipeline_modules})
    files.update(
        {
            "modules.json": json.dumps(modules, indent=2) + "\n",
            "sentence_bert_config.json": json.dumps(module_config, indent=2) + "\n",
            "config_sentence_transformers.json": json.dumps(st_config, indent=2) + "\n",
        }
    )
    return files


def write_sentence_transformers_files(folder: Path, model: PreTrainedModel, task: "str | None" = None) -> None:
    """Write `sentence_transformers_files(model, task)` into the export folder being assembled (`export_model`).
    The pipeline files are the ones `export_model` writes for the pipelines of the model's tasks, generated from the
    same sources; an export of a family trained on conditional tasks only also gets `pipeline_pair_similarity.py`,
    which the input module imports."""
    for name, text in sentence_transformers_files(model, task).items():
        (folder / name).write_text(text)
