"""What a frozen backbone's [MASK] state of the neighbor-attention prompt knows about the class.

    python -m benchmarks.probe_mask --backbone minilm --dataset sick-e --output probe_mask.json
    python -m benchmarks.probe_mask --backbone backbones/minilm-tapt-sick-e   # an `adapt_mlm` folder

Neighbor attention freezes its encoder and classifies the last hidden state of the label [MASK] of
`[CLS] [MASK]' Y1 or ... or Yp of [MASK] [SEP] [MASK]' x1 [SEP] [MASK]' x2 [SEP]`. This script builds the model as
`pairzoo.train` does (`create_model("neighbor-attention", ...)`, label words from the data set's class names), encodes
the train and validation rows with the collator the model trains on (rows and caps as `pairzoo.train` selects them:
`--max_train_rows N` is `--max_train_samples N` with the same `--seed`), runs the frozen backbone alone (no neighbour
branch; eval mode, inference mode) and collects per example the last layer's state at the label [MASK]
(`mask_positions`, not every mask token: the connecting tokens [MASK]' are mask tokens too), the mean over the
non-padding tokens and the first token's state ([CLS]).

Reported as JSON (printed, and written atomically to `--output` when given), accuracies x100 as `pairzoo.train`
reports them:
- per feature (`features.mask`, `.mean`, `.cls`): the validation accuracy of a ridge classifier
  (`RidgeClassifierCV`, alphas 0.1, 1, 10, 100 chosen by leave-one-out on train; features standardised with a
  `StandardScaler` fit on train) and the alpha it chose; and, over the validation rows, `mean_pairwise_cosine` (all
  pairs i != j; null for one row) and `spread`, the mean of ||h_i - mean h|| / ||mean h||: how much the state moves
  between inputs, relative to its size (the [MASK] state's are the ones probed; the other two put them in scale);
- `majority_accuracy`: the validation accuracy of always predicting train's most frequent class (`majority_class`);
- `head`: the neighbor-attention head alone (dropout 0.1 and a linear layer, AdamW, batch 16) trained for
  `--head_epochs` on the train rows' [MASK] states, raw or standardised per dimension, at each of
  `--head_learning_rates`: its validation accuracy and predicted class counts. It tells an ill-conditioned head input
  (the raw states stall at the majority class while the standardised ones learn) from missing information;
- rows used, backbone, data set, label words, `adapted` (the backbone is a folder with `pairzoo.adapt_mlm`'s
  `adaptation.json`), `mlm_head_weights` (the checkpoint has MLM-head weights), device and elapsed seconds.

Bad input (a flag out of range, a data set neighbor attention cannot train on) prints one line,
`probe_mask.py: error: ...`, and exits with status 2 before anything is written (`pairzoo.console.run_command`).
"""

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from sklearn.linear_model import RidgeClassifierCV
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing pairzoo

from pairzoo import create_model, list_backbones, load_tokenizer  # noqa: E402
from pairzoo.adapt_mlm import ADAPTATION_FILE  # noqa: E402
from pairzoo.console import parse_flags, run_command  # noqa: E402
from pairzoo.fileio import write_text_atomic  # noqa: E402
from pairzoo.modeling.modeling_neighbor_attention import resolve_label_words  # noqa: E402
from pairzoo.training.cli import DataArguments, check_model_reads_task, check_number, prepare_data  # noqa: E402
from pairzoo.training.collators import make_collator  # noqa: E402
from pairzoo.training.data import dataset_task  # noqa: E402

MODEL = "neighbor-attention"
FEATURES = ("mask", "mean", "cls")
ALPHAS = (0.1, 1.0, 10.0, 100.0)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@torch.inference_mode()
def extract_features(model, tokenizer, rows, batch_size: int, max_length: int) -> "dict[str, np.ndarray]":
    """Frozen-backbone features of `rows` (dicts with `sentence1`, `sentence2`, `label`), encoded by the model's own
    training collator: `mask` (label [MASK] state), `mean` (mean over non-padding tokens), `cls` (first token), each
    (N, d) float32, and `labels` (N,)."""
    model.eval()
    collator = make_collator(model, tokenizer, max_length)
    parts = {name: [] for name in (*FEATURES, "labels")}
    for start in range(0, len(rows), batch_size):
        batch = collator([rows[i] for i in range(start, min(start + batch_size, len(rows)))])
        attention_mask = batch["attention_mask"].to(DEVICE)
        hidden = model.backbone(input_ids=batch["input_ids"].to(DEVICE), attention_mask=attention_mask)
        hidden = hidden.last_hidden_state.float()
        weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
        parts["mask"].append(hidden[torch.arange(len(hidden), device=DEVICE), batch["mask_positions"].to(DEVICE)])
        parts["mean"].append((hidden * weights).sum(1) / weights.sum(1))
        parts["cls"].append(hidden[:, 0])
        parts["labels"].append(batch["labels"])
    return {name: torch.cat(values).cpu().numpy() for name, values in parts.items()}


def ridge_probe(train_x: np.ndarray, train_y: np.ndarray, eval_x: np.ndarray, eval_y: np.ndarray) -> dict:
    """Validation accuracy (x100) of a ridge classifier on standardised features, and the alpha it chose."""
    scaler = StandardScaler().fit(train_x)
    probe = RidgeClassifierCV(alphas=ALPHAS).fit(scaler.transform(train_x), train_y)
    return {"accuracy": 100.0 * probe.score(scaler.transform(eval_x), eval_y), "alpha": float(probe.alpha_)}


def train_head(
    train_x: np.ndarray,
    train_y: np.ndarray,
    eval_x: np.ndarray,
    eval_y: np.ndarray,
    learning_rate: float,
    epochs: int,
    standardise: bool,
    seed: int = 0,
) -> dict:
    """The neighbor-attention head alone on frozen features: dropout 0.1 and a linear layer (weights N(0, 0.02), zero
    bias, as `_init_weights` gives it), AdamW (weight decay 0.01), batch 16, `epochs` over the train rows; on the raw
    features or on features standardised per dimension with train's mean and std. Validation accuracy (x100) and the
    predicted class counts."""
    generator = torch.Generator().manual_seed(seed)
    x, y = torch.tensor(train_x, dtype=torch.float32), torch.tensor(train_y, dtype=torch.long)
    x_eval = torch.tensor(eval_x, dtype=torch.float32)
    if standardise:
        mean, std = x.mean(0), x.std(0).clamp_min(1e-6)
        x, x_eval = (x - mean) / std, (x_eval - mean) / std
    classes = int(max(train_y.max(), eval_y.max())) + 1
    head = torch.nn.Linear(x.shape[1], classes)
    with torch.no_grad():
        head.weight.normal_(0.0, 0.02, generator=generator)
        head.bias.zero_()
    optimizer = torch.optim.AdamW(head.parameters(), lr=learning_rate, weight_decay=0.01)
    for _ in range(epochs):
        order = torch.randperm(len(x), generator=generator)
        for start in range(0, len(x), 16):
            rows = order[start : start + 16]
            keep = (torch.rand(x[rows].shape, generator=generator) >= 0.1).float() / 0.9
            loss = torch.nn.functional.cross_entropy(head(x[rows] * keep), y[rows])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        predicted = head(x_eval).argmax(1).numpy()
    return {
        "accuracy": 100.0 * float(np.mean(predicted == eval_y)),
        "predicted_counts": np.bincount(predicted, minlength=classes).tolist(),
    }


def state_geometry(states: np.ndarray) -> dict:
    """Mean pairwise cosine over pairs i != j (None for one state) and spread = mean ||h_i - mean h|| / ||mean h||."""
    states = states.astype(np.float64)
    count = len(states)
    units = states / np.linalg.norm(states, axis=1, keepdims=True)
    # sum over i != j of u_i . u_j = ||sum u_i||^2 - sum ||u_i||^2
    pairwise = (np.sum(units.sum(0) ** 2) - count) / (count * (count - 1)) if count > 1 else None
    center = states.mean(0)
    spread = np.linalg.norm(states - center, axis=1).mean() / np.linalg.norm(center)
    return {"mean_pairwise_cosine": None if pairwise is None else float(pairwise), "spread": float(spread)}


@dataclass
class ProbeArguments:
    """The flags of `benchmarks/probe_mask.py`, range-checked: a non-positive number or a data set neighbor attention
    cannot train on is a ValueError naming the flag."""

    backbone: str = field(default="minilm", metadata={"help": "minilm, tiny-bert, a folder (adapt_mlm's) or Hub id"})
    dataset: str = field(default="sick-e", metadata={"help": "a pair-classification data set with a train split"})
    data_dir: str | None = field(default=None, metadata={"help": "shared data folder (default: pairzoo's resolution)"})
    max_train_rows: int | None = field(default=None, metadata={"help": "cap on train rows (default: all)"})
    max_eval_rows: int | None = field(default=None, metadata={"help": "cap on validation rows (default: all)"})
    batch_size: int = field(default=64, metadata={"help": "rows per forward of the frozen backbone"})
    max_length: int = field(default=128, metadata={"help": "token limit of each encoded row"})
    seed: int = field(default=42, metadata={"help": "pairzoo.train's default: the same capped train rows"})
    head_learning_rates: list[float] = field(
        default_factory=lambda: [1e-3, 1e-2], metadata={"help": "learning rates of the head-only runs"}
    )
    head_epochs: int = field(default=5, metadata={"help": "epochs of the head-only runs on [MASK] states"})
    output: str | None = field(default=None, metadata={"help": "also write the JSON here"})

    def __post_init__(self) -> None:
        for flag in ("max_train_rows", "max_eval_rows", "batch_size", "max_length", "head_epochs"):
            if getattr(self, flag) is not None:
                check_number(flag, getattr(self, flag), "an integer >= 1", lambda v: v >= 1)
        for rate in self.head_learning_rates:
            check_number("head_learning_rates", rate, "a number > 0", lambda v: v > 0)
        check_model_reads_task(MODEL, self.dataset, dataset_task(self.dataset))


def main(argv: "list[str] | None" = None) -> dict:
    """Run the probe with the flags `argv`; returns the result (also printed, and written to `--output`)."""
    args = parse_flags(ProbeArguments, argv, __doc__.split("\n\n")[0])
    started = time.perf_counter()
    data_args = DataArguments(
        dataset=args.dataset,
        data_dir=args.data_dir,
        max_train_samples=args.max_train_rows,
        max_eval_samples=args.max_eval_rows,
    )
    train, validation = prepare_data(data_args, args.seed)
    if len(set(train["label"])) < 2:
        raise ValueError(f"the {len(train)} train rows hold one class: a probe needs two; raise `--max_train_rows`.")
    label_names = list(train.features["label"].names)
    torch.manual_seed(args.seed)  # the tiny test backbones are random
    model = create_model(MODEL, backbone=args.backbone, id2label=dict(enumerate(label_names))).to(DEVICE)
    tokenizer = load_tokenizer(args.backbone)
    train_features = extract_features(model, tokenizer, train, args.batch_size, args.max_length)
    eval_features = extract_features(model, tokenizer, validation, args.batch_size, args.max_length)
    train_y, eval_y = train_features["labels"], eval_features["labels"]
    majority = int(np.bincount(train_y).argmax())
    backbone_folder = args.backbone not in list_backbones() and Path(args.backbone).is_dir()
    result = {
        "backbone": args.backbone,
        "dataset": args.dataset,
        "adapted": backbone_folder and (Path(args.backbone) / ADAPTATION_FILE).is_file(),
        "mlm_head_weights": model.config.token_decoder == "mlm_head",
        "label_words": resolve_label_words(model.config),
        "train_rows": len(train_y),
        "validation_rows": len(eval_y),
        "max_length": args.max_length,
        "seed": args.seed,
        "majority_class": label_names[majority],
        "majority_accuracy": 100.0 * float(np.mean(eval_y == majority)),
        "features": {
            name: {
                **ridge_probe(train_features[name], train_y, eval_features[name], eval_y),
                **state_geometry(eval_features[name]),
            }
            for name in FEATURES
        },
        "head": [
            {
                "learning_rate": learning_rate,
                "epochs": args.head_epochs,
                "standardised": standardise,
                **train_head(
                    train_features["mask"],
                    train_y,
                    eval_features["mask"],
                    eval_y,
                    learning_rate,
                    args.head_epochs,
                    standardise,
                    args.seed,
                ),
            }
            for learning_rate in args.head_learning_rates
            for standardise in (False, True)
        ],
        "device": DEVICE,
        "elapsed_seconds": time.perf_counter() - started,
    }
    text = json.dumps(result, indent=2)
    if args.output:
        write_text_atomic(args.output, text + "\n")
    print(text)
    return result


if __name__ == "__main__":
    sys.exit(run_command("probe_mask.py", main))
