"""`python -m pairzoo.train`: fine-tune any registered model on any pairzoo data set with `transformers.Trainer`.

`accelerate launch -m pairzoo.train ...` (or `torchrun`) runs the same command on several processes, GPUs or nodes
(docs/scaling.md); on machines without an accelerator the processes train data-parallel over gloo. At the end the
validation metrics are printed as JSON, written to `<output_dir>/metrics.json`, and the trained model is written as a
Hub-ready export folder (`<output_dir>/export`), both atomically (temporary name, then rename).

Training stops with a `NonFiniteLossError` at the first non-finite loss and never saves non-finite weights, so the
last checkpoint stays good; `--resume_from_checkpoint last` resumes from the newest complete checkpoint.
"""

import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import HfArgumentParser, Trainer, TrainerCallback, TrainingArguments, set_seed
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ..backbones import load_tokenizer
from ..fileio import write_text_atomic
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


class NonFiniteLossError(FloatingPointError):
    """Training met a non-finite loss (or would have saved non-finite weights) and stopped."""


TRAINER_STATE_FILE = "trainer_state.json"  # written last into a checkpoint folder: its presence marks it complete


def complete_checkpoints(output_dir: "str | os.PathLike") -> list[Path]:
    """`checkpoint-<step>` folders of `output_dir` that were written to the end, oldest first.

    The Trainer writes `trainer_state.json` after the weights, optimizer, scheduler and RNG states, so a folder
    without it is what a kill during saving leaves behind and is never resumed from.
    """
    folder = Path(output_dir)
    if not folder.is_dir():
        return []
    found = []
    for path in folder.glob(f"{PREFIX_CHECKPOINT_DIR}-*"):
        step = path.name[len(PREFIX_CHECKPOINT_DIR) + 1 :]
        if step.isdigit() and path.is_dir() and (path / TRAINER_STATE_FILE).is_file():
            found.append((int(step), path))
    return [path for _, path in sorted(found)]


def resolve_resume_checkpoint(value: "str | None", output_dir: "str | os.PathLike") -> "str | None":
    """The checkpoint folder to resume from: None, `last` (or `true`: the newest complete checkpoint of
    `output_dir`), or a checkpoint folder, which must exist and be complete."""
    if value is None or value.lower() in ("", "false", "none"):
        return None
    if value.lower() in ("last", "latest", "true"):
        checkpoints = complete_checkpoints(output_dir)
        if not checkpoints:
            raise FileNotFoundError(
                f"--resume_from_checkpoint {value}: no complete checkpoint in {str(output_dir)!r} "
                f"(a `{PREFIX_CHECKPOINT_DIR}-<step>` folder with {TRAINER_STATE_FILE})."
            )
        return str(checkpoints[-1])
    path = Path(value)
    if not path.is_dir():
        raise FileNotFoundError(f"--resume_from_checkpoint: checkpoint folder {value!r} does not exist.")
    if not (path / TRAINER_STATE_FILE).is_file():
        raise ValueError(
            f"--resume_from_checkpoint: {value!r} has no {TRAINER_STATE_FILE}; it is not a complete checkpoint "
            "(the run was probably killed while saving it): resume from an earlier one."
        )
    return str(path)


def _last_good_checkpoint(output_dir: str) -> str:
    checkpoints = complete_checkpoints(output_dir)
    if not checkpoints:
        return "no checkpoint was saved before it (use --save_strategy steps --save_steps N)"
    return f"the last good checkpoint is {str(checkpoints[-1])!r} (resume with --resume_from_checkpoint last)"


class _FiniteWeightsBeforeSave(TrainerCallback):
    """Refuse to save a checkpoint whose weights are not all finite, so the previous one stays the newest good one."""

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if control.should_save and model is not None:
            for name, parameter in model.named_parameters():
                if not torch.isfinite(parameter).all():
                    raise NonFiniteLossError(
                        f"parameter {name!r} is not finite after step {state.global_step}; training stopped without "
                        f"saving it: {_last_good_checkpoint(args.output_dir)}."
                    )

    on_epoch_end = on_step_end  # `--save_strategy epoch` decides to save here


class _GuardedTrainer(Trainer):
    """`Trainer` that stops at the first non-finite training loss, on every process at once."""

    def training_step(self, model, inputs, num_items_in_batch=None) -> torch.Tensor:
        loss = super().training_step(model, inputs, num_items_in_batch)
        finite = torch.isfinite(loss.detach()).all().to(torch.int32)
        if self.args.world_size > 1:  # every rank must stop together, or the others hang in the next all-reduce
            torch.distributed.all_reduce(finite, op=torch.distributed.ReduceOp.MIN)
        if not bool(finite):
            step = self.state.global_step + 1
            local = loss.detach().float().mean().item()
            value = local if not math.isfinite(local) else "not finite on another process"
            raise NonFiniteLossError(
                f"training loss is {value} at step {step} "
                f"(epoch {self.state.epoch or 0:.2f}); training stopped before the optimizer step: "
                f"{_last_good_checkpoint(self.args.output_dir)}. Lower --learning_rate, set --max_grad_norm, or "
                "check the labels."
            )
        return loss


def _validate_data_args(data_args: DataArguments) -> None:
    """Range checks of the data flags, so a bad value fails before anything is loaded or written."""
    checks = {
        "max_length": (data_args.max_length, 1),
        "max_train_samples": (data_args.max_train_samples, 1),
        "max_eval_samples": (data_args.max_eval_samples, 1),
        "synthetic_train_size": (data_args.synthetic_train_size, 1),
        "synthetic_validation_size": (data_args.synthetic_validation_size, 1),
    }
    for name, (value, low) in checks.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise ValueError(f"`--{name}` must be an integer >= {low}, got {value!r}.")


def _parse_overrides(text: "str | None") -> dict:
    if not text:
        return {}
    try:
        overrides = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"`config_overrides` is not valid JSON ({err.msg} at character {err.pos}).") from err
    if not isinstance(overrides, dict):
        raise ValueError("`config_overrides` must be a JSON object.")
    return overrides


def _check_world_size(training_args: TrainingArguments) -> None:
    """Launched on N processes, training must run data-parallel on N: never N independent copies."""
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if launched > 1 and training_args.world_size != launched:
        raise RuntimeError(
            f"launched on {launched} processes but the Trainer set up world_size={training_args.world_size}: the "
            "processes would train independent copies. Without a GPU pass --use_cpu true (pairzoo.train does this "
            "itself when no accelerator is found)."
        )


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
    overrides = _parse_overrides(model_args.config_overrides)
    _validate_data_args(data_args)
    resume = resolve_resume_checkpoint(training_args.resume_from_checkpoint, training_args.output_dir)
    _check_world_size(training_args)
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
    trainer = _GuardedTrainer(
        model=model,
        args=training_args,
        train_dataset=train,
        eval_dataset=validation,
        data_collator=collator,
        processing_class=tokenizer,
        compute_metrics=compute_metrics_fn(num_labels),
        callbacks=[_FiniteWeightsBeforeSave()],
    )
    trainer.train(resume_from_checkpoint=resume)
    metrics = trainer.evaluate(metric_key_prefix="validation")
    non_finite = [k for k, v in metrics.items() if isinstance(v, float) and not math.isfinite(v)]
    if non_finite:
        raise NonFiniteLossError(f"validation metrics {non_finite} are not finite; nothing was written.")
    result = {
        "model": model_args.model,
        "backbone": model_args.backbone,
        "dataset": data_args.dataset,
        "seed": training_args.seed,
        "train_rows": len(train),
        "validation_rows": len(validation),
        "config_overrides": {k: v for k, v in overrides.items() if k not in ("id2label", "label2id")},
        "world_size": training_args.world_size,
        "effective_train_batch_size": training_args.per_device_train_batch_size
        * training_args.world_size
        * training_args.gradient_accumulation_steps,
        "train_steps": trainer.state.global_step,
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
        write_text_atomic(output_dir / "metrics.json", json.dumps(result, indent=2, default=str))
        print(json.dumps(result, indent=2, default=str))
    return result


def main(argv: "list[str] | None" = None) -> dict:
    """Parse `argv` (model, data and `TrainingArguments` flags) and run."""
    parser = HfArgumentParser((ModelArguments, DataArguments, TrainingArguments))
    argv = sys.argv[1:] if argv is None else argv
    if "--output_dir" not in argv:
        argv = [*argv, "--output_dir", "outputs/train"]
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not _has_accelerator():
        # Accelerate only sets up CPU data parallelism (gloo) when told to use the CPU; otherwise every process
        # would train its own copy of the model.
        os.environ.setdefault("ACCELERATE_USE_CPU", "true")
    model_args, data_args, training_args = parser.parse_args_into_dataclasses(args=argv)
    return run(model_args, data_args, training_args)


def _has_accelerator() -> bool:
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:
        return accelerator.is_available()
    return torch.cuda.is_available()


__all__ = [
    "DataArguments",
    "ModelArguments",
    "NonFiniteLossError",
    "complete_checkpoints",
    "main",
    "resolve_resume_checkpoint",
    "run",
]
