"""`python -m pairzoo.train`: fine-tune any registered model on any pairzoo data set, or on your own data files
(`--train_file`, `--validation_file`, `--test_file`: CSV, TSV, JSON lines or Parquet, see
`pairzoo.training.data.load_data_files`), with `transformers.Trainer`.

`accelerate launch -m pairzoo.train ...` (or `torchrun`) runs the same command on several processes, GPUs or nodes
(docs/scaling.md); on machines without an accelerator the processes train data-parallel over gloo. At the end the
validation metrics are printed as JSON, written to `<output_dir>/metrics.json`, and the trained model is written as a
Hub-ready export folder (`<output_dir>/export`), both atomically (temporary name, then rename). What a model reports
about its own state (`training_stats()`, see `TrainingStatsCallback`) goes into every training log and, as it was at
the last one, into the metrics as `train_stats/<name>`.

Every flag, the model/data set pairing, the data and the checkpoint to resume from are checked before anything is
written: a run that would not train (0 epochs or steps, no training rows), an invalid number, a model that cannot
read the data set's task, a checkpoint that is incomplete, unreadable or another model's, fail with an error naming
the flag, field or file, and leave the disk as it was. A run that fails later removes what it created, except
complete checkpoints, which it keeps to resume from.

The output folder is claimed for the run (`claimed_output_dir`): a second run into it is refused while the first
runs, a killed run's lock is taken over, and what a run killed mid-write left (a hidden half-written export) is
cleared. Every file a run writes gets a plain `open`'s mode (checkpoints included; safetensors writes 0600). A
validation metric that is undefined (a Spearman correlation of constant labels) does not fail the run: it is logged,
recorded as `null` in metrics.json (strict JSON) and left out of the export's evaluation results.

Training stops with a `NonFiniteLossError` at the first non-finite loss and never saves non-finite weights, so the
last checkpoint stays good; `--resume_from_checkpoint last` resumes from the newest complete checkpoint.
"""

import argparse
import dataclasses
import importlib.util
import inspect
import json
import math
import os
import shutil
import sys
import textwrap
import zipfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from datasets import Dataset, DatasetDict
from safetensors import SafetensorError, safe_open
from transformers import Trainer, TrainerCallback, TrainingArguments, set_seed
from transformers.integrations import get_available_reporting_integrations
from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK
from transformers.optimization import TYPE_TO_SCHEDULER_FUNCTION
from transformers.trainer import OPTIMIZER_NAME, OPTIMIZER_NAME_BIN, SCHEDULER_NAME, TRAINER_STATE_NAME
from transformers.trainer_callback import TrainerState
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, SchedulerType
from transformers.utils import CONFIG_NAME, SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME, logging

from ..backbones import load_tokenizer
from ..configuration.common import check_max_length
from ..console import ConsoleArguments, OneLineErrorParser
from ..fileio import (
    check_folder_free,
    check_output_folder,
    folder_lock,
    give_plain_modes,
    remove_leftovers,
    write_text_atomic,
)
from ..registry import create_model, get_model_spec, list_models
from . import collators
from .collators import align_special_tokens, check_training_data, make_collator
from .data import (
    COLUMN_FLAGS,
    KG_DATASETS,
    DataFiles,
    dataset_task,
    has_training_split,
    label_range,
    list_datasets,
    load_data_files,
    load_dataset,
)
from .metrics import compute_metrics_fn, positive_class

logger = logging.get_logger(__name__)

DEFAULT_OUTPUT_DIR = "outputs/train"
PAIR_TASKS = ("pair-regression", "pair-classification")
CONDITIONAL_TASKS = ("conditional-similarity", "conditional-classification")


@dataclass
class ModelArguments:
    """Which model to build and on which backbone."""

    model: str = field(default="cross-encoder", metadata={"help": "Registered model name (listed below)."})
    backbone: str = field(default="minilm", metadata={"help": "minilm, tiny-bert, tiny-roberta, a folder or Hub id."})
    config_overrides: str | None = field(
        default=None, metadata={"help": "Method hyper-parameters as JSON, e.g. '{\"use_transform\": true}'."}
    )


@dataclass
class DataArguments:
    """Which data to train and evaluate on."""

    dataset: str | None = field(
        default=None,
        metadata={
            "help": "Data set name (listed below) or hub:<id>; synthetic when neither it nor --train_file is given."
        },
    )
    train_file: str | None = field(
        default=None,
        metadata={
            "help": "Your own training data instead of --dataset: a .csv, .tsv, .jsonl (or .json: JSON lines) or "
            ".parquet file with the columns below. The task kind (pair regression or classification, conditional "
            "similarity or classification) follows from its columns and labels, and is logged."
        },
    )
    validation_file: str | None = field(
        default=None, metadata={"help": "Validation data for --train_file (needed with it), its columns."}
    )
    test_file: str | None = field(
        default=None, metadata={"help": "Labelled test data for --train_file, evaluated after training (test_*)."}
    )
    sentence1_column: str = field(default="sentence1", metadata={"help": "--train_file column of the first sentence."})
    sentence2_column: str = field(
        default="sentence2", metadata={"help": "--train_file column of the second sentence (optional)."}
    )
    condition_column: str = field(
        default="condition", metadata={"help": "--train_file column of the condition (optional)."}
    )
    label_column: str = field(
        default="label",
        metadata={
            "help": "--train_file column of the labels: class names, integer class ids, or scores (regression)."
        },
    )
    label_min: float | None = field(
        default=None,
        metadata={
            "help": "Lowest regression label of --train_file data (default: the training file's minimum); given "
            "(or --label_max), integer labels are regression scores, not class ids."
        },
    )
    label_max: float | None = field(
        default=None, metadata={"help": "Highest regression label (default: the training file's maximum)."}
    )
    data_dir: str | None = field(default=None, metadata={"help": "Shared data folder (default ../shared/data)."})
    csts_path: str | None = field(default=None, metadata={"help": "Folder of the official C-STS CSVs."})
    max_length: int = field(default=128, metadata={"help": "Maximum tokens per example (sentences truncated first)."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Cap on training rows."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Cap on validation rows."})
    synthetic_train_size: int = field(default=2000, metadata={"help": "Rows of the synthetic train split."})
    synthetic_validation_size: int = field(default=400, metadata={"help": "Rows of the synthetic validation split."})
    data_seed_split: int = field(default=0, metadata={"help": "Seed of the synthetic data and derived splits."})
    export: bool = field(
        default=True,
        metadata={
            "help": "Write the Hub export folder <output_dir>/export at the end (--no_export: only checkpoints and "
            "metrics.json)."
        },
    )

    def __post_init__(self) -> None:
        """One data source: `--dataset` (default synthetic) or own files (`--train_file` with `--validation_file`),
        each with only its own flags."""
        own = {"train_file": self.train_file, "validation_file": self.validation_file, "test_file": self.test_file}
        if self.train_file is None:
            given = [f"--{name}" for name, value in own.items() if value is not None]
            given += [
                f"--{name}"
                for name in OWN_FILE_ONLY_FLAGS
                if getattr(self, name) != getattr(DataArguments, name, None)
            ]
            if given:
                raise ValueError(f"`{given[0]}` is read with --train_file only (own data files); pass --train_file.")
            self.dataset = "synthetic" if self.dataset is None else self.dataset
            return
        if self.dataset is not None:
            raise ValueError(
                f"`--dataset` and `--train_file` are mutually exclusive: train on --dataset {self.dataset} or on your "
                "own files, not both."
            )
        if self.validation_file is None:
            raise ValueError(
                "`--train_file` needs `--validation_file` (the rows evaluated during and after training)."
            )
        for name in ("data_dir", "csts_path"):
            if getattr(self, name) is not None:
                raise ValueError(f"`--{name}` is read with --dataset only; with --train_file leave it out.")


# Flags of `DataArguments` read only with own data files (`--train_file`).
OWN_FILE_ONLY_FLAGS = (
    "sentence1_column",
    "sentence2_column",
    "condition_column",
    "label_column",
    "label_min",
    "label_max",
)


class NonFiniteLossError(FloatingPointError):
    """Training met a non-finite loss (or would have saved non-finite weights) and stopped."""


# A checkpoint folder's files, as the Trainer names them; it writes TRAINER_STATE_NAME last, so its presence marks a
# folder written to the end.
WEIGHT_FILES = (SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME)
OPTIMIZER_FILES = (OPTIMIZER_NAME, OPTIMIZER_NAME_BIN)


def _missing_checkpoint_parts(path: Path) -> list[str]:
    """What a checkpoint folder lacks to resume from it: the trainer state, config, weights, optimizer and scheduler
    states. Without the last two the Trainer would silently restart the optimizer and the learning-rate schedule.
    DeepSpeed keeps weights, optimizer (and its scheduler) in a `global_step*` folder; sharded FSDP optimizer states
    are an `optimizer*` folder (the Trainer's own test)."""
    names = {entry.name for entry in path.iterdir()}
    deepspeed = any(name.startswith("global_step") for name in names)
    optimizer_folder = any("optimizer" in name and (path / name).is_dir() for name in names)
    missing = [name for name in (TRAINER_STATE_NAME, CONFIG_NAME) if name not in names]
    if not deepspeed:
        if not names & set(WEIGHT_FILES):
            missing.append(WEIGHT_FILES[0])
        if not names & set(OPTIMIZER_FILES) and not optimizer_folder:
            missing.append(OPTIMIZER_FILES[0])
        if SCHEDULER_NAME not in names:
            missing.append(SCHEDULER_NAME)
    return missing


def complete_checkpoints(output_dir: "str | os.PathLike") -> list[Path]:
    """`checkpoint-<step>` folders of `output_dir` that were written to the end, oldest first.

    The Trainer writes `trainer_state.json` after the weights, optimizer, scheduler and RNG states, so a folder
    without it is what a kill during saving leaves behind; a folder without the config, weights, optimizer or
    scheduler state cannot be resumed exactly either. Neither is ever resumed from (the newest folder,
    `transformers.trainer_utils.get_last_checkpoint`, may be such a folder).
    """
    folder = Path(output_dir)
    if not folder.is_dir():
        return []
    found = []
    for path in folder.glob(f"{PREFIX_CHECKPOINT_DIR}-*"):
        step = path.name[len(PREFIX_CHECKPOINT_DIR) + 1 :]
        if step.isdecimal() and path.is_dir() and not _missing_checkpoint_parts(path):
            found.append((int(step), path))
    return [path for _, path in sorted(found)]


def resolve_resume_checkpoint(value: "str | None", output_dir: "str | os.PathLike") -> "str | None":
    """The checkpoint folder to resume from: None, `last` (or `true`: the newest complete checkpoint of
    `output_dir`), or a checkpoint folder, which must exist and be complete (see `complete_checkpoints`)."""
    if value is None or value.lower() in ("", "false", "none"):
        return None
    if value.lower() in ("last", "latest", "true"):
        checkpoints = complete_checkpoints(output_dir)
        if not checkpoints:
            raise FileNotFoundError(
                f"--resume_from_checkpoint {value}: no complete checkpoint in {str(output_dir)!r} "
                f"(a `{PREFIX_CHECKPOINT_DIR}-<step>` folder with {TRAINER_STATE_NAME}, {CONFIG_NAME}, "
                f"{WEIGHT_FILES[0]}, {OPTIMIZER_FILES[0]} and {SCHEDULER_NAME})."
            )
        return str(checkpoints[-1])
    path = Path(value)
    if not path.is_dir():
        raise FileNotFoundError(f"--resume_from_checkpoint: checkpoint folder {value!r} does not exist.")
    missing = _missing_checkpoint_parts(path)
    if missing:
        raise ValueError(
            f"--resume_from_checkpoint: {value!r} is not a complete checkpoint: it has no {', '.join(missing)} (a "
            "kill while saving, or a checkpoint saved without optimizer state); resume from another checkpoint."
        )
    return str(path)


def _check_checkpoint_files(checkpoint: str) -> None:
    """Read what the Trainer will load from `checkpoint`, so a damaged file is an error naming it before any
    training: the trainer state (JSON the Trainer can load), the weights' safetensors headers and the optimizer and
    scheduler archives (`torch.save` writes zip files; a truncated one has no central directory)."""
    folder = Path(checkpoint)
    hint = "resume from an earlier checkpoint by its path, or delete this one"
    state_file = folder / TRAINER_STATE_NAME
    try:
        state = TrainerState.load_from_json(str(state_file))
    except (ValueError, TypeError, UnicodeDecodeError) as err:  # JSONDecodeError is a ValueError
        raise ValueError(f"checkpoint file {str(state_file)!r} is not a valid trainer state ({err}); {hint}.") from err
    if not isinstance(state.global_step, int) or state.global_step < 0:
        raise ValueError(f"checkpoint file {str(state_file)!r} has no valid `global_step`; {hint}.")
    index = folder / WEIGHT_FILES[1]
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"checkpoint file {str(index)!r} is not a valid weight index ({err}); {hint}.") from err
    else:
        shards = [WEIGHT_FILES[0]] if (folder / WEIGHT_FILES[0]).is_file() else []
    for shard in shards:
        try:
            with safe_open(str(folder / shard), framework="pt") as handle:
                handle.keys()
        except (SafetensorError, OSError) as err:
            raise ValueError(
                f"checkpoint file {str(folder / shard)!r} is corrupt or truncated ({err}); {hint}."
            ) from err
    for name in (*OPTIMIZER_FILES, SCHEDULER_NAME):
        path = folder / name
        if path.is_file() and not zipfile.is_zipfile(path):
            raise ValueError(
                f"checkpoint file {str(path)!r} is corrupt or truncated (not a torch.save archive); {hint}."
            )


_RUN_SPECIFIC_CONFIG_KEYS = {"architectures", "dtype", "torch_dtype", "transformers_version", "_name_or_path"}


def _config_differences(saved: dict, current: dict, prefix: str = "") -> list[str]:
    """`key: saved value, this run's value` for the keys both configs define (nested ones dotted), leaving out what
    saving or the install location changes; `model_type` (of the method, then of the backbone) first."""
    found = []
    for key in sorted(saved.keys() & current.keys() - _RUN_SPECIFIC_CONFIG_KEYS, key=lambda k: (k != "model_type", k)):
        old, new = saved[key], current[key]
        if isinstance(old, dict) and isinstance(new, dict):
            found += _config_differences(old, new, f"{prefix}{key}.")
        elif old != new:
            found.append(f"`{prefix}{key}` {old!r} in the checkpoint, {new!r} in this run")
    return found


def _checkpoint_differences(folder: Path, config) -> list[str]:
    """How the `config.json` of checkpoint `folder` differs from `config` (nothing when it has none)."""
    config_file = folder / CONFIG_NAME
    if not config_file.is_file():
        return []
    try:
        saved = json.loads(config_file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"checkpoint file {str(config_file)!r} is not valid JSON ({err}).") from err
    if not isinstance(saved, dict):
        raise ValueError(f"checkpoint file {str(config_file)!r} must hold a JSON object.")
    if saved.get("model_type") != config.model_type:
        return [f"model {saved.get('model_type')!r} in the checkpoint, {config.model_type!r} in this run"]
    try:
        return _config_differences(type(config).from_dict(saved).to_dict(), config.to_dict())
    except (ValueError, TypeError) as err:
        return [f"its config.json does not load as this run's {type(config).__name__} ({err})"]


def _check_checkpoints_match(config, output_dir: str, resume: "str | None") -> None:
    """Refuse to resume from, or to write next to, checkpoints of another model: the `config.json` of the
    checkpoint resumed from and of every checkpoint of `output_dir` must have this run's model type and config."""
    folders = sorted(Path(output_dir).glob(f"{PREFIX_CHECKPOINT_DIR}-*")) if Path(output_dir).is_dir() else []
    if resume is not None:
        folders.insert(0, Path(resume))
    for folder in folders:
        differences = _checkpoint_differences(folder, config)
        if not differences:
            continue
        listed = "; ".join(differences[:4]) + (f"; and {len(differences) - 4} more" if len(differences) > 4 else "")
        if resume is not None and folder == Path(resume):
            raise ValueError(
                f"--resume_from_checkpoint: checkpoint {str(folder)!r} was written by another model or "
                f"configuration: {listed}. Resume with the --model, --backbone, --dataset (or --train_file and its "
                "label flags) and --config_overrides that wrote it."
            )
        raise ValueError(
            f"--output_dir {output_dir!r} holds checkpoint {str(folder)!r} of another model or configuration: "
            f"{listed}. Choose another --output_dir, or move those checkpoints away."
        )


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


class TrainingStatsCallback(TrainerCallback):
    """Adds what the model reports about its own state to each training log, its `log_history` entry included.

    The protocol: a model may define `training_stats() -> dict[str, float]`, detached Python floats named
    `<family>/<part>/<statistic>` (Comateformer: each combined layer's mean gate, ||C|| / ||S|| and mix gate, averaged
    over the training forwards since the previous call; the Siamese matcher: the current gates of its gated
    feature-attention pairs). It is called at each training log, the Trainer's last one at the end of `train`
    included, never at an evaluation's log (whose dict is the metrics `evaluate` returns). Nothing is added for a
    model without the method or when it returns nothing. `latest` keeps the last stats added, which `run` reports as
    `train_stats/<name>` metrics. Statistics are this process's, not all-reduced."""

    def __init__(self) -> None:
        self.latest: dict[str, float] = {}
        self._evaluating = False

    def on_prediction_step(self, args, state, control, **kwargs) -> None:
        self._evaluating = True  # the evaluation's log comes before `on_evaluate` (or `on_predict`)

    def on_evaluate(self, args, state, control, **kwargs) -> None:
        self._evaluating = False

    on_predict = on_evaluate

    def on_log(self, args, state, control, logs=None, model=None, **kwargs) -> None:
        stats_of = getattr(model, "training_stats", None)
        if stats_of is None or logs is None or self._evaluating:
            return
        stats = stats_of()
        if stats:
            logs.update(stats)
            if state.log_history:  # the Trainer appends its copy of `logs` before calling on_log
                state.log_history[-1].update(stats)
            self.latest = dict(stats)


class GuardedTrainer(Trainer):
    """`Trainer` that stops at the first non-finite training loss, on every process at once."""

    def training_step(
        self, model: torch.nn.Module, inputs: dict, num_items_in_batch: "torch.Tensor | int | None" = None
    ) -> torch.Tensor:
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

    def _get_eval_sampler(self, eval_dataset: Dataset) -> "torch.utils.data.Sampler | list[int] | None":
        """On one process, evaluation rows longest first (characters of `TEXT_COLUMNS`, as sentence-transformers'
        `CrossEncoder.predict` sorts), so each batch pads to similar lengths; the metrics do not depend on
        the order of the rows."""
        columns = [c for c in TEXT_COLUMNS if c in getattr(eval_dataset, "column_names", ())]
        if self.args.world_size > 1 or not columns:
            return super()._get_eval_sampler(eval_dataset)
        texts = eval_dataset.select_columns(columns)
        lengths = [sum(len(row[c] or "") for c in columns) for row in texts]
        return sorted(range(len(lengths)), key=lambda i: -lengths[i])


# The text columns of pairzoo's data sets (`pairzoo.training.data`): the sort key of length-sorted evaluation.
TEXT_COLUMNS = ("sentence1", "sentence2", "condition")


def model_tasks(model: str) -> tuple[str, ...]:
    """Task kinds `model` trains on (its registry spec's `training_tasks`)."""
    return get_model_spec(model).training_tasks


def trainable_datasets(model: str) -> list[str]:
    """Data sets of `list_datasets()` with a training split whose task `model` can train on."""
    tasks = model_tasks(model)
    return [name for name in list_datasets() if has_training_split(name) and dataset_task(name) in tasks]


def check_model_reads_task(model: str, dataset: str, task: str, flag: str = "--dataset") -> None:
    """A ValueError (with the models that can) unless `model` trains on `dataset` (given by `flag`), whose task kind
    is `task`."""
    if task in model_tasks(model):
        return
    readers = [name for name in list_models() if task in model_tasks(name)]
    pair_hint = (
        f" Sentence pairs have no condition, and {model!r} is built around one (it would read the second sentence "
        f"as the condition); for {task} data use {', '.join(readers)}."
        if task in PAIR_TASKS and set(model_tasks(model)) <= set(CONDITIONAL_TASKS)
        else f" Models that can train on {dataset!r}: {', '.join(readers) or 'none'}."
    )
    raise ValueError(
        f"--model {model} cannot train on {flag} {dataset}: {dataset!r} is {task} data, and {model!r} trains on "
        f"{' or '.join(model_tasks(model))} data (data sets: {', '.join(trainable_datasets(model))}).{pair_hint}"
    )


def check_number(flag: str, value: object, rule: str, ok: Callable[[float], bool]) -> None:
    """`value` (of flag `--flag`) must be a finite number for which `ok(value)` holds, as `rule` says."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not number or not ok(value):
        raise ValueError(f"`--{flag}` must be {rule}, got {value!r}.")


def _validate_data_args(data_args: DataArguments) -> None:
    """Range checks of the data flags, so a bad value fails before anything is loaded or written."""
    for name in ("max_length", "max_train_samples", "max_eval_samples", "synthetic_train_size"):
        value = getattr(data_args, name)
        if value is not None:
            check_number(name, value, "an integer >= 1", lambda v: v >= 1)
    # Spearman and Pearson need two validation rows; classification needs one.
    check_number("synthetic_validation_size", data_args.synthetic_validation_size, "an integer >= 2", lambda v: v >= 2)
    check_number("data_seed_split", data_args.data_seed_split, "an integer in [0, 2**32)", lambda v: 0 <= v < 2**32)
    for name in ("label_min", "label_max"):
        if getattr(data_args, name) is not None:
            check_number(name, getattr(data_args, name), "a finite number", lambda v: True)
    if data_args.csts_path is not None and data_args.dataset != "csts":
        raise ValueError(
            f"`--csts_path` is read with --dataset csts only; this run trains on --dataset {data_args.dataset} (leave "
            "--csts_path out, or pass --dataset csts)."
        )


def _validate_training_args(args: TrainingArguments) -> None:
    """Numbers of `TrainingArguments` that would fail inside torch, train nothing or be silently ignored."""
    if args.push_to_hub:
        raise ValueError(
            "`--push_to_hub` would upload the Trainer's output_dir, whose config has no `auto_map` and no code ("
            "a repo that cannot load); train without it, then upload the export folder: "
            "python -m pairzoo.hub_cards push OUTPUT_DIR/export ORG/NAME"
        )
    if args.max_steps == 0 or args.max_steps < -1:
        raise ValueError(
            f"`--max_steps` must be a positive number of optimizer steps, or -1 to train for --num_train_epochs, got "
            f"{args.max_steps}: this run would not train (and would export an untrained model)."
        )
    if args.max_steps == -1:
        check_number("num_train_epochs", args.num_train_epochs, "> 0 (or give --max_steps)", lambda v: v > 0)
    positive = "an integer >= 1"
    for name in ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps"):
        check_number(name, getattr(args, name), positive, lambda v: v >= 1)
    check_number("learning_rate", args.learning_rate, "a number > 0", lambda v: v > 0)
    for name in ("weight_decay", "max_grad_norm", "adam_epsilon"):
        check_number(name, getattr(args, name), "a number >= 0", lambda v: v >= 0)
    check_number(
        "warmup_steps", args.warmup_steps, "a number >= 0 (a fraction of the steps when < 1)", lambda v: v >= 0
    )
    for name in ("adam_beta1", "adam_beta2", "label_smoothing_factor"):
        check_number(name, getattr(args, name), "in [0, 1)", lambda v: 0 <= v < 1)
    for name in ("logging_steps", "save_steps", "eval_steps"):
        if getattr(args, name) is not None:
            check_number(name, getattr(args, name), "a number > 0 (a fraction of the steps when < 1)", lambda v: v > 0)
    check_number("dataloader_num_workers", args.dataloader_num_workers, "an integer >= 0", lambda v: v >= 0)
    check_number("seed", args.seed, "an integer in [0, 2**32)", lambda v: 0 <= v < 2**32)
    if args.data_seed is not None:
        check_number("data_seed", args.data_seed, "an integer in [0, 2**32)", lambda v: 0 <= v < 2**32)
    for name in ("eval_accumulation_steps", "dataloader_prefetch_factor", "save_total_limit"):
        if getattr(args, name) is not None:
            check_number(name, getattr(args, name), "an integer >= 1", lambda v: v >= 1)
    if args.neftune_noise_alpha is not None:
        check_number("neftune_noise_alpha", args.neftune_noise_alpha, "a number > 0", lambda v: v > 0)
    check_number("eval_delay", args.eval_delay, "a number >= 0", lambda v: v >= 0)
    check_number("ddp_timeout", args.ddp_timeout, "an integer >= 1 (seconds)", lambda v: v >= 1)
    if args.fp16 and (args.use_cpu or not has_accelerator()):
        raise ValueError(
            "`--fp16` needs a GPU or another accelerator; none was found (on the CPU float16 mixed precision is "
            "turned off, and the run would train in float32)."
        )
    if args.label_names is not None and list(args.label_names) != ["labels"]:
        raise ValueError(
            f"`--label_names` is fixed by pairzoo.train to ['labels']; leave it out (got {args.label_names})."
        )
    if args.optim_args:
        pairs = args.optim_args.replace(" ", "").split(",")
        if any(pair.count("=") != 1 or pair.startswith("=") for pair in pairs):
            raise ValueError(f"`--optim_args` must be comma-separated key=value pairs, got {args.optim_args!r}.")
    _check_lr_scheduler_kwargs(args)
    _check_report_to(args.report_to)


def _check_lr_scheduler_kwargs(args: TrainingArguments) -> None:
    """`--lr_scheduler_kwargs` must be a JSON object of arguments the `--lr_scheduler_type` schedule takes (the
    Trainer would fail with a TypeError at its first step, or ignore them)."""
    kwargs = args.lr_scheduler_kwargs
    if not kwargs:
        return
    if not isinstance(kwargs, dict):
        raise ValueError(f"`--lr_scheduler_kwargs` must be a JSON object, got {kwargs!r}.")
    kind = SchedulerType(args.lr_scheduler_type)
    parameters = inspect.signature(TYPE_TO_SCHEDULER_FUNCTION[kind]).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return  # passed on to a torch scheduler, which checks them
    taken = [name for name in parameters if name not in ("optimizer", "num_warmup_steps", "num_training_steps")]
    if kind in (SchedulerType.CONSTANT, SchedulerType.CONSTANT_WITH_WARMUP):
        taken = []  # `get_scheduler` passes these schedules no extra arguments
    unknown = sorted(set(kwargs) - set(taken))
    if unknown:
        raise ValueError(
            f"`--lr_scheduler_kwargs` has {unknown}, which the {kind.value!r} schedule does not take "
            f"(it takes {taken or 'none'})."
        )


def _check_report_to(report_to: "list | None") -> None:
    """Each `--report_to` integration must be one transformers knows and whose package is installed."""
    available = get_available_reporting_integrations()
    for name in report_to or []:
        if name is None or name in available:
            continue
        if name not in INTEGRATION_TO_CALLBACK:
            raise ValueError(f"`--report_to` {name!r} is not one of {sorted(INTEGRATION_TO_CALLBACK)} (or none, all).")
        raise ValueError(
            f"`--report_to {name}` needs the {name} package, which is not installed (installed: "
            f"{', '.join(available) or 'none'})."
        )


def parse_overrides(text: "str | None") -> dict:
    """The config overrides of `--config_overrides`: a JSON object as a dict (`{}` for no text); anything else is a
    ValueError saying what is wrong."""
    if not text:
        return {}
    try:
        overrides = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"`config_overrides` is not valid JSON ({err.msg} at character {err.pos}).") from err
    if not isinstance(overrides, dict):
        raise ValueError("`config_overrides` must be a JSON object.")
    return overrides


def check_world_size(training_args: TrainingArguments) -> None:
    """Launched on N processes, training must run data-parallel on N: never N independent copies."""
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if launched > 1 and training_args.world_size != launched:
        raise RuntimeError(
            f"launched on {launched} processes but the Trainer set up world_size={training_args.world_size}: the "
            "processes would train independent copies. Without a GPU pass --use_cpu true (pairzoo.train does this "
            "itself when no accelerator is found)."
        )


def prepare_data(data_args: DataArguments, seed: int) -> "tuple[Dataset, Dataset]":
    """The train and validation splits of `data_args.dataset`, train capped to a `seed`-shuffled sample; a ValueError
    when a split is missing or too small to train or evaluate on."""
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
    return cap_splits(data["train"], data["validation"], data_args, seed, f"dataset {data_args.dataset!r}")


def prepare_data_files(data_args: DataArguments, seed: int, tasks: "tuple[str, ...]") -> DataFiles:
    """Own data files of `data_args` (`--train_file`, `--validation_file`, `--test_file`, the column and label
    flags) read by `load_data_files` for a model that trains on task kinds `tasks`, the train and validation splits
    capped as `cap_splits` does."""
    files = {"train": data_args.train_file, "validation": data_args.validation_file, "test": data_args.test_file}
    data = load_data_files(
        {split: path for split, path in files.items() if path is not None},
        {field: getattr(data_args, f"{field}_column") for field in COLUMN_FLAGS},
        data_args.label_min,
        data_args.label_max,
        tasks,
    )
    splits = DatasetDict(data.splits)
    name = f"--train_file {data_args.train_file!r} with --validation_file {data_args.validation_file!r}"
    splits["train"], splits["validation"] = cap_splits(splits["train"], splits["validation"], data_args, seed, name)
    if "test" in splits and data.label_range is not None and len(splits["test"]) < 2:
        raise ValueError(f"`--test_file` {data_args.test_file!r} has 1 row: Spearman and Pearson need at least 2.")
    return dataclasses.replace(data, splits=splits)


def cap_splits(
    train: Dataset, validation: Dataset, data_args: DataArguments, seed: int, name: str
) -> "tuple[Dataset, Dataset]":
    """`train` capped to `--max_train_samples` rows (a `seed`-shuffled sample) and `validation` to
    `--max_eval_samples` (its first rows); a ValueError naming the data (`name`) when no training row is left or too
    few validation rows to evaluate (2 for Spearman and Pearson, 1 for classification)."""
    if data_args.max_train_samples is not None:
        train = train.shuffle(seed=seed).select(range(min(data_args.max_train_samples, len(train))))
    if data_args.max_eval_samples is not None:
        validation = validation.select(range(min(data_args.max_eval_samples, len(validation))))
    if len(train) == 0:
        raise ValueError(f"{name} has no training rows: this run would not train.")
    regression = not hasattr(train.features["label"], "names")
    if len(validation) < (2 if regression else 1):
        flag = "--max_eval_samples" if data_args.max_eval_samples is not None else "its validation split"
        raise ValueError(
            f"{name} gives {len(validation)} validation row(s) ({flag}): "
            f"{'Spearman and Pearson need at least 2' if regression else 'evaluation needs at least 1'}."
        )
    return train, validation


def _created_root(path: Path) -> "Path | None":
    """The outermost folder that writing into `path` would create (None when `path` exists)."""
    root = None
    for folder in (path, *path.parents):
        if folder.exists():
            return root
        root = folder
    return root


@contextmanager
def undone_on_failure(output_dir: Path, enabled: bool) -> Iterator[None]:
    """On an exception in the block, remove what it created under `output_dir` (the folder itself when it created
    it; never an entry that was there before), unless it saved a complete checkpoint, which is kept to resume
    from. `enabled` is False on the processes that do not write outputs."""
    created_root = _created_root(output_dir)
    before = set(output_dir.iterdir()) if created_root is None and output_dir.is_dir() else set()
    checkpoints = complete_checkpoints(output_dir)
    try:
        yield
    except BaseException:
        if enabled and output_dir.is_dir() and complete_checkpoints(output_dir) == checkpoints:
            for entry in [created_root] if created_root is not None else set(output_dir.iterdir()) - before:
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
        raise


def check_output_dir(
    output_dir: "str | os.PathLike", is_main: "bool | None" = None, flag: str = "--output_dir"
) -> None:
    """Before anything is built: `output_dir` must be or become a writable folder, and (on the main process; None:
    the launcher's `RANK` is 0 or unset) no running run may hold it (`pairzoo.fileio.check_folder_free`). Reads
    only."""
    check_output_folder(output_dir, flag)
    if is_main is None:
        is_main = int(os.environ.get("RANK", "0")) == 0
    if is_main:
        check_folder_free(output_dir, flag)


@contextmanager
def claimed_output_dir(
    output_dir: "str | os.PathLike", args: TrainingArguments, flag: str = "--output_dir"
) -> Iterator[None]:
    """Hold `output_dir` for a run's block. On the main process (`process_index` 0; the others of a distributed run
    take no lock): its lock (`pairzoo.fileio.folder_lock`: another run into it is refused while this one runs, a
    killed run's lock is taken over), then the removal of what a run killed mid-write left there
    (`pairzoo.fileio.remove_leftovers`, logged in one line). On every process that saves: `undone_on_failure`. The
    lock is released at the end, also on an exception."""
    output_dir = Path(output_dir)
    with ExitStack() as stack:
        if args.process_index == 0:
            stack.enter_context(folder_lock(output_dir, flag))
            removed, restored = remove_leftovers(output_dir)
            if removed or restored:
                logger.warning(
                    "%s %r: cleared what an interrupted run left: removed %s%s.",
                    flag,
                    str(output_dir),
                    ", ".join(removed) or "nothing",
                    f"; restored {', '.join(restored)} (its replacement was never put in place)" if restored else "",
                )
        stack.enter_context(undone_on_failure(output_dir, args.should_save))
        yield


class PlainModesOnSave(TrainerCallback):
    """Gives every file of each checkpoint the mode a plain `open` gives (`pairzoo.fileio.give_plain_modes`), as the
    export has: safetensors writes its files 0600."""

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        if args.should_save and folder.is_dir():
            give_plain_modes(folder)


def undefined_to_none(value: object) -> object:
    """`value` with every non-finite float (in nested dicts and lists too) replaced by None (JSON `null`)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: undefined_to_none(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [undefined_to_none(item) for item in value]
    return value


def strict_json(value: object) -> str:
    """`value` as strict JSON (indented): non-finite numbers become `null` (`undefined_to_none`), never a bare NaN."""
    return json.dumps(undefined_to_none(value), indent=2, default=str, allow_nan=False)


def undefined_metrics(metrics: dict) -> list[str]:
    """The names of the metrics in `metrics` that are undefined (NaN or infinite: a correlation of constant or
    non-finite labels or predictions, an F1 of a positive class absent from both, metrics of non-finite class
    scores), each logged as a warning. A non-finite loss is a failed run: a `NonFiniteLossError`."""
    non_finite = [name for name, v in metrics.items() if isinstance(v, (int, float)) and not math.isfinite(v)]
    losses = [name for name in non_finite if name.endswith("loss")]
    if losses:
        raise NonFiniteLossError(f"validation metrics {losses} are not finite; nothing was written.")
    for name in non_finite:
        logger.warning(
            "%s is undefined (%s: constant or non-finite labels or predictions, or a class absent from both); "
            "metrics.json records it as null and the export's "
            "evaluation results leave it out.",
            name,
            metrics[name],
        )
    return non_finite


def _warmup_text(warmup_steps: float) -> str:
    """`--warmup_steps` as the Trainer reads it: a fraction of the training steps below 1, else a step count."""
    return f"{warmup_steps:g} of the training steps" if 0 < warmup_steps < 1 else f"{int(warmup_steps)} steps"


def _training_recipe(
    model_args: ModelArguments, data_args: DataArguments, training_args: TrainingArguments, result: dict
) -> dict:
    """The run's recipe for the export's model card (`export_model(training=...)`): data, schedule, batch sizes,
    optimiser and seed, as this run used them."""
    recipe = {
        "dataset": result["dataset"],
        "backbone": model_args.backbone,
        "train_rows": result["train_rows"],
        "validation_rows": result["validation_rows"],
        "epochs": training_args.num_train_epochs,
        "max_steps": training_args.max_steps if training_args.max_steps > 0 else None,
        "train_steps": result["train_steps"],
        "per_device_train_batch_size": training_args.per_device_train_batch_size,
        "gradient_accumulation_steps": training_args.gradient_accumulation_steps,
        "world_size": result["world_size"],
        "effective_train_batch_size": result["effective_train_batch_size"],
        "learning_rate": training_args.learning_rate,
        "lr_scheduler_type": getattr(training_args.lr_scheduler_type, "value", training_args.lr_scheduler_type),
        "warmup": _warmup_text(training_args.warmup_steps),
        "weight_decay": training_args.weight_decay,
        "optimizer": getattr(training_args.optim, "value", training_args.optim),
        "max_length": data_args.max_length,
        "seed": training_args.seed,
        "bf16": training_args.bf16,
        "fp16": training_args.fp16,
    }
    return {name: value for name, value in recipe.items() if value is not None}


def _eval_results(metrics: dict, undefined: "list[str]", data_args: DataArguments) -> "list[dict]":
    """The export's evaluation results: the defined `validation_*` (and `test_*`) metrics, each split named by its
    data set or file."""
    files = {"validation": data_args.validation_file, "test": data_args.test_file}
    results = []
    for split in ("validation", "test"):
        measured = {k: v for k, v in metrics.items() if k.startswith(f"{split}_") and k not in undefined}
        if measured:
            dataset = Path(files[split]).name if data_args.train_file is not None else data_args.dataset
            results.append({"dataset": dataset, "split": split, "metrics": measured})
    return results


def run(model_args: ModelArguments, data_args: DataArguments, training_args: TrainingArguments) -> dict:
    """Check every input, then train, evaluate on validation, write metrics.json and the export folder; returns the
    metrics. Nothing is written before all checks pass."""
    spec = get_model_spec(model_args.model)
    own_files = data_args.train_file is not None
    if not own_files:
        task = dataset_task(data_args.dataset) if not data_args.dataset.startswith("hub:") else spec.task
        if task == "kg-triples":
            raise ValueError(
                f"dataset {data_args.dataset!r} is a knowledge graph; train it with its method's KG script."
            )
        check_model_reads_task(model_args.model, data_args.dataset, task)
    overrides = parse_overrides(model_args.config_overrides)
    _validate_data_args(data_args)
    _validate_training_args(training_args)
    check_output_dir(training_args.output_dir, training_args.process_index == 0)
    resume = resolve_resume_checkpoint(training_args.resume_from_checkpoint, training_args.output_dir)
    if resume is not None:
        _check_checkpoint_files(resume)
    check_world_size(training_args)
    set_seed(training_args.seed)
    test = None
    if own_files:
        own = prepare_data_files(data_args, training_args.seed, spec.training_tasks)
        task, data_name = own.task, Path(data_args.train_file).name
        check_model_reads_task(model_args.model, data_args.train_file, task, flag="--train_file")
        logger.warning("%s", own.summary)
        train, validation, test = own.splits["train"], own.splits["validation"], own.splits.get("test")
        regression_range = own.label_range
    else:
        data_name = data_args.dataset
        train, validation = prepare_data(data_args, training_args.seed)
        regression_range = label_range(data_args.dataset) or (1.0, 5.0)
    label_feature = train.features["label"]
    label_names = list(label_feature.names) if hasattr(label_feature, "names") else None
    if hasattr(label_feature, "names"):
        overrides.setdefault("id2label", dict(enumerate(label_feature.names)))
        overrides.setdefault("label2id", {n: i for i, n in enumerate(label_feature.names)})
    else:
        overrides.setdefault("label_min", regression_range[0])
        overrides.setdefault("label_max", regression_range[1])
    model = create_model(model_args.model, backbone=model_args.backbone, **overrides)
    check_max_length(data_args.max_length, getattr(model.config, "backbone_config", None), "--max_length")
    if training_args.label_smoothing_factor and model.config.num_labels == 1:
        raise ValueError(
            f"`--label_smoothing_factor` smooths class labels; {data_name} is regression data (scores), got "
            f"{training_args.label_smoothing_factor}."
        )
    _check_checkpoints_match(model.config, training_args.output_dir, resume)
    tokenizer = load_tokenizer(model_args.backbone)
    align_special_tokens(model, tokenizer)  # the Trainer has nothing to align (and no warning to give)
    num_labels = model.config.num_labels
    label_bounds = None if num_labels > 1 else (model.config.label_min, model.config.label_max)
    splits = {"train": train, "validation": validation, **({"test": test} if test is not None else {})}
    # The rows are checked with pairzoo's collator for the model; the Trainer gets `make_collator`'s.
    checker = collators.make_collator(model, tokenizer, data_args.max_length, label_bounds)
    check_training_data(model, checker, splits, data_name)
    collator = make_collator(model, tokenizer, data_args.max_length, label_bounds)
    training_args.remove_unused_columns = False  # the collator encodes the text columns
    training_args.label_names = ["labels"]
    unpin_memory_without_accelerator(training_args)
    stats_callback = TrainingStatsCallback()
    with claimed_output_dir(training_args.output_dir, training_args):
        trainer = GuardedTrainer(
            model=model,
            args=training_args,
            train_dataset=train,
            eval_dataset=validation,
            data_collator=collator,
            processing_class=tokenizer,
            compute_metrics=compute_metrics_fn(num_labels, label_names),
            callbacks=[_FiniteWeightsBeforeSave(), stats_callback, PlainModesOnSave()],
        )
        train_output = trainer.train(resume_from_checkpoint=resume)
        metrics = trainer.evaluate(metric_key_prefix="validation")
        if test is not None:
            metrics |= trainer.evaluate(test, metric_key_prefix="test")
        # The mean training loss over the run's steps beside the dev metrics (it tells under- from overfitting); not
        # after a resume, where the Trainer averages only the steps this process trained.
        if resume is None:
            metrics["train_loss"] = train_output.training_loss
        # A non-finite loss is a failed run; a NaN correlation is an undefined metric (constant labels or
        # predictions): the trained run is kept, the metric recorded as null.
        undefined = undefined_metrics(metrics)
        metrics = undefined_to_none(metrics)
        result = {
            "model": model_args.model,
            "backbone": model_args.backbone,
            "dataset": data_name,
            "seed": training_args.seed,
            "train_rows": len(train),
            "validation_rows": len(validation),
            "config_overrides": {k: v for k, v in overrides.items() if k not in ("id2label", "label2id")},
            "world_size": training_args.world_size,
            "effective_train_batch_size": training_args.per_device_train_batch_size
            * training_args.world_size
            * training_args.gradient_accumulation_steps,
            "train_steps": trainer.state.global_step,
            # The model's own state at the last training log (`TrainingStatsCallback`) beside the dev metrics; not
            # in the export's eval results, which are measurements on the data set.
            "metrics": metrics | {f"train_stats/{name}": value for name, value in stats_callback.latest.items()},
        }
        if own_files:
            result["task"] = task
            result["data_files"] = {
                split: getattr(data_args, f"{split}_file")
                for split in ("train", "validation", "test")
                if getattr(data_args, f"{split}_file") is not None
            }
            result["label_names" if label_names is not None else "label_range"] = label_names or list(label_bounds)
            if test is not None:
                result["test_rows"] = len(test)
        if label_names is not None and len(label_names) == 2:
            result["f1_positive_class"] = label_names[positive_class(label_names)]
        if trainer.is_world_process_zero():
            output_dir = Path(training_args.output_dir)
            if data_args.export:
                from ..hub_cards import export_model

                export_model(
                    trainer.model,
                    tokenizer,
                    output_dir / "export",
                    eval_results=_eval_results(metrics, undefined, data_args),
                    base_model=model_args.backbone,
                    overwrite=True,
                    task=task,
                    training=_training_recipe(model_args, data_args, training_args, result),
                )
                result["export_dir"] = str(output_dir / "export")
            write_text_atomic(output_dir / "metrics.json", strict_json(result))
            print(strict_json(result))
        return undefined_to_none(result)


def _wrap(text: str, indent: str = "", first: "str | None" = None) -> list[str]:
    return textwrap.wrap(
        text, 116, initial_indent=indent if first is None else first, subsequent_indent=indent, break_on_hyphens=False
    )


def _help_epilog() -> str:
    lines = ["models, and the data sets each can train on:"]
    for name in list_models():
        lines += _wrap(", ".join(trainable_datasets(name)), " " * 22, f"  {name:<20}")
    lines += ["", "data sets and their task:"]
    named = [f"{name} ({dataset_task(name)})" for name in list_datasets() if name not in KG_DATASETS]
    lines += _wrap(", ".join(named), "  ")
    evaluation_only = [name for name in list_datasets() if name not in KG_DATASETS and not has_training_split(name)]
    lines += _wrap(
        f"hub:<id> loads a Hugging Face Hub data set (needs internet). The knowledge graph {', '.join(KG_DATASETS)} "
        f"has its own training script; {', '.join(evaluation_only)} has no training split (evaluation only).",
        "  ",
    )
    lines += ["", "your own data:"] + _wrap(
        "--train_file and --validation_file (and --test_file) instead of --dataset: .csv, .tsv, .jsonl or .parquet "
        "files with the columns --sentence1_column, --label_column and, as the task needs, --sentence2_column and "
        "--condition_column. A sentence pair is pair regression (scores) or pair classification (class names or "
        "integer class ids), a pair with a condition conditional similarity (scores), a sentence with a condition "
        "conditional classification; the task kind and labels read are logged in one line.",
        "  ",
    )
    lines += [""] + _wrap(
        "An error in the input prints one line, `pairzoo.train: error: ...`, and exits with status 2 (with "
        "--traceback: the Python traceback)."
    )
    return "\n".join(lines)


_DESCRIPTION = (
    "Fine-tune a pairzoo model on a data set with transformers.Trainer, evaluate it on the validation split and write "
    "<output_dir>/metrics.json and a Hub-ready export folder <output_dir>/export. Every flag is checked before "
    "anything is written. The pairzoo flags come first, then every transformers.TrainingArguments flag."
)


def build_parser() -> OneLineErrorParser:
    """The argument parser of `python -m pairzoo.train`: pairzoo's flags, then `transformers.TrainingArguments`, then
    `--traceback`."""
    parser = OneLineErrorParser(
        (ModelArguments, DataArguments, TrainingArguments, ConsoleArguments),
        prog="python -m pairzoo.train",
        description="\n".join(_wrap(_DESCRIPTION)),
        epilog=_help_epilog(),
    )
    parser.set_defaults(output_dir=DEFAULT_OUTPUT_DIR)
    return parser


def parse_args(argv: "list[str] | None" = None) -> "tuple[ModelArguments, DataArguments, TrainingArguments, bool]":
    """The model, data and training arguments of `argv` (default `sys.argv[1:]`), and whether `--traceback` was
    given."""
    argv = sys.argv[1:] if argv is None else argv
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not has_accelerator():
        # Accelerate only sets up CPU data parallelism (gloo) when told to use the CPU; otherwise every process
        # would train its own copy of the model.
        os.environ.setdefault("ACCELERATE_USE_CPU", "true")
    parser = build_parser()
    _check_raw_training_flags(parser.parse_known_args(argv)[0])
    model_args, data_args, training_args, console = parser.parse_args_into_dataclasses(args=argv)
    return model_args, data_args, training_args, console.traceback


def is_installed(package: str) -> bool:
    """Whether `package` can be imported (without importing it)."""
    return importlib.util.find_spec(package) is not None


def _check_raw_training_flags(namespace: argparse.Namespace) -> None:
    """Flags that `TrainingArguments` would refuse with an error that does not name them, or with a crash: a JSON
    flag that is not JSON, `--deepspeed` without deepspeed, `--bf16` without an accelerator."""
    for name in getattr(TrainingArguments, "_VALID_DICT_FIELDS", ()):
        value = getattr(namespace, name, None)
        if isinstance(value, str) and value.startswith("{"):
            try:
                json.loads(value)
            except json.JSONDecodeError as err:
                raise ValueError(f"`--{name}` is not valid JSON ({err.msg} at character {err.pos}).") from err
    if getattr(namespace, "deepspeed", None) and not is_installed("deepspeed"):
        raise ValueError("`--deepspeed` needs the deepspeed package, which is not installed.")
    for name in ("bf16", "bf16_full_eval"):
        if getattr(namespace, name, False) and not getattr(namespace, "use_cpu", False) and not has_accelerator():
            raise ValueError(
                f"`--{name}` needs a GPU or another accelerator; none was found (with --use_cpu true it runs in "
                "bfloat16 on the CPU)."
            )


def main(argv: "list[str] | None" = None) -> dict:
    """Parse `argv` (model, data and `TrainingArguments` flags) and run; errors are raised (the `python -m
    pairzoo.train` entry point prints the ones in the input as one line)."""
    model_args, data_args, training_args, _ = parse_args(argv)
    return run(model_args, data_args, training_args)


def has_accelerator() -> bool:
    """Whether torch sees an accelerator (`torch.accelerator` where torch has it, else CUDA)."""
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:
        return accelerator.is_available()
    return torch.cuda.is_available()


def unpin_memory_without_accelerator(training_args: TrainingArguments) -> None:
    """Turn off pinned host memory for the data loaders when the run is on the CPU (`use_cpu` or no accelerator):
    there is nothing to pin it for, and torch warns about it."""
    if training_args.use_cpu or not has_accelerator():
        training_args.dataloader_pin_memory = False


__all__ = [
    "DataArguments",
    "GuardedTrainer",
    "ModelArguments",
    "NonFiniteLossError",
    "PlainModesOnSave",
    "TrainingStatsCallback",
    "build_parser",
    "cap_splits",
    "check_model_reads_task",
    "check_number",
    "check_output_dir",
    "check_world_size",
    "claimed_output_dir",
    "complete_checkpoints",
    "has_accelerator",
    "is_installed",
    "main",
    "model_tasks",
    "parse_args",
    "parse_overrides",
    "prepare_data",
    "prepare_data_files",
    "resolve_resume_checkpoint",
    "run",
    "strict_json",
    "trainable_datasets",
    "undefined_metrics",
    "undefined_to_none",
    "undone_on_failure",
    "unpin_memory_without_accelerator",
]
