"""`python -m pairzoo.train`: fine-tune any registered model on any pairzoo data set with `transformers.Trainer`.

`accelerate launch -m pairzoo.train ...` (or `torchrun`) runs the same command on several processes, GPUs or nodes.
At the end the validation metrics are printed as JSON, written to `<output_dir>/metrics.json`, and the trained model
is written as a Hub-ready export folder (`<output_dir>/export`).
"""

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from transformers import HfArgumentParser, Trainer, TrainingArguments, set_seed

from ..backbones import load_tokenizer
from ..registry import create_model, get_model_spec
from .collators import make_collator
from .data import dataset_task, label_range, load_dataset
from .metrics import compute_metrics_fn


@dataclass
class ModelArguments:
    """Which model to build and on which backbone."""

    model: str = field(default="cross-encoder", metadata={"help": "Registered model name (pairzoo.list_models())."})
    backbone: str = field(default="minilm", metadata={"help": "minilm, tiny-bert, tiny-roberta, a folder or Hub id."})
    config_overrides: str | None = field(
        default=None, metadata={"help": "Method hyper-parameters as JSON, e.g. '{\"use_transform\": true}'."}
    )


@dataclass
class DataArguments:
    """Which data to train and evaluate on."""

    dataset: str = field(default="synthetic", metadata={"help": "Data set name (see pairzoo.training.data)."})
    data_dir: str | None = field(default=None, metadata={"help": "Shared data folder (default ../shared/data)."})
    csts_path: str | None = field(default=None, metadata={"help": "Folder of the official C-STS CSVs."})
    max_length: int = field(default=128, metadata={"help": "Maximum tokens per example (sentences truncated first)."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Cap on training rows."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Cap on validation rows."})
    synthetic_train_size: int = field(default=2000, metadata={"help": "Rows of the synthetic train split."})
    synthetic_validation_size: int = field(default=400, metadata={"help": "Rows of the synthetic validation split."})
    data_seed_split: int = field(default=0, metadata={"help": "Seed of the synthetic data and derived splits."})
    export: bool = field(default=True, metadata={"help": "Write the Hub export folder at the end."})


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _prepare_data(data_args: DataArguments, seed: int):
    data = load_dataset(
        data_args.dataset,
        data_dir=data_args.data_dir,
        seed=data_args.data_seed_split,
        csts_path=data_args.csts_path,
        synthetic_sizes=(data_args.synthetic_train_size, data_args.synthetic_validation_size, 0),
    )
    for split in ("train", "validation"):
        if split not in data:
            raise ValueError(f"dataset {data_args.dataset!r} has no {split!r} split (it has {sorted(data)}).")
    train, validation = data["train"], data["validation"]
    if data_args.max_train_samples is not None:
        train = train.shuffle(seed=seed).select(range(min(data_args.max_train_samples, len(train))))
    if data_args.max_eval_samples is not None:
        validation = validation.select(range(min(data_args.max_eval_samples, len(validation))))
    return train, validation


def run(model_args: ModelArguments, data_args: DataArguments, training_args: TrainingArguments) -> dict:
    """Train, evaluate on validation, write metrics.json and the export folder; returns the metrics."""
    spec = get_model_spec(model_args.model)
    task = dataset_task(data_args.dataset) if not data_args.dataset.startswith("hub:") else spec.task
    if task == "kg-triples":
        raise ValueError(f"dataset {data_args.dataset!r} is a knowledge graph; train it with its method's KG script.")
    overrides = json.loads(model_args.config_overrides) if model_args.config_overrides else {}
    if not isinstance(overrides, dict):
        raise ValueError("`config_overrides` must be a JSON object.")
    set_seed(training_args.seed)
    train, validation = _prepare_data(data_args, training_args.seed)
    label_feature = train.features["label"]
    if hasattr(label_feature, "names"):
        overrides.setdefault("id2label", dict(enumerate(label_feature.names)))
        overrides.setdefault("label2id", {n: i for i, n in enumerate(label_feature.names)})
    else:
        low, high = label_range(data_args.dataset) or (1.0, 5.0)
        overrides.setdefault("label_min", low)
        overrides.setdefault("label_max", high)
    model = create_model(model_args.model, backbone=model_args.backbone, **overrides)
    tokenizer = load_tokenizer(model_args.backbone)
    num_labels = model.config.num_labels
    label_bounds = None if num_labels > 1 else (model.config.label_min, model.config.label_max)
    collator = make_collator(model, tokenizer, data_args.max_length, label_bounds)
    training_args.remove_unused_columns = False
    training_args.label_names = ["labels"]
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train,
        eval_dataset=validation,
        data_collator=collator,
        processing_class=tokenizer,
        compute_metrics=compute_metrics_fn(num_labels),
    )
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    metrics = trainer.evaluate(metric_key_prefix="validation")
    result = {
        "model": model_args.model,
        "backbone": model_args.backbone,
        "dataset": data_args.dataset,
        "seed": training_args.seed,
        "train_rows": len(train),
        "validation_rows": len(validation),
        "config_overrides": {k: v for k, v in overrides.items() if k not in ("id2label", "label2id")},
        "metrics": metrics,
    }
    if trainer.is_world_process_zero():
        output_dir = Path(training_args.output_dir)
        output_dir.mkdir(parents=True, exist_ok=True)
        if data_args.export:
            from ..hub_cards import export_model

            export_model(
                trainer.model,
                tokenizer,
                output_dir / "export",
                eval_results=[{"dataset": data_args.dataset, "split": "validation", "metrics": metrics}],
                base_model=model_args.backbone,
                overwrite=True,
            )
            result["export_dir"] = str(output_dir / "export")
        _atomic_write_text(output_dir / "metrics.json", json.dumps(result, indent=2, default=str))
        print(json.dumps(result, indent=2, default=str))
    return result


def main(argv: "list[str] | None" = None) -> dict:
    """Parse `argv` (model, data and `TrainingArguments` flags) and run."""
    parser = HfArgumentParser((ModelArguments, DataArguments, TrainingArguments))
    argv = sys.argv[1:] if argv is None else argv
    if "--output_dir" not in argv:
        argv = [*argv, "--output_dir", "outputs/train"]
    model_args, data_args, training_args = parser.parse_args_into_dataclasses(args=argv)
    return run(model_args, data_args, training_args)


__all__ = ["DataArguments", "ModelArguments", "main", "run"]
