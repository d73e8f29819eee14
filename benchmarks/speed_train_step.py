"""Training-step speed: pairzoo's cross-encoder against sentence-transformers' `CrossEncoder`, on the same batches.

Two arms, each trained as its own library trains it, on the same pairs in the same order:

- `pairzoo`: `create_model("cross-encoder", backbone=...)` (regression on STS-B's 0-5 scale, its default loss); a step
  collates the batch's text rows with the collator `pairzoo.train` uses (`make_collator`: the tokenizer's encoding of
  the pair), moves them to the device and calls the model's forward with `labels`, which returns the loss;
- `sentence-transformers`: `CrossEncoder(backbone folder, num_labels=1)` (its `.model` a transformers
  `AutoModelForSequenceClassification`); a step does what one step of its `CrossEncoderTrainer` does with the default
  loss for one label: its `CrossEncoderDataCollator` passes the texts and labels (scaled to 0-1) through, its
  `BinaryCrossEntropyLoss` tokenizes the pairs (`CrossEncoder.preprocess`), runs the model and takes binary
  cross-entropy on the logits.

Then, in both, backward, one `torch.optim.AdamW` step (lr 2e-5, torch's defaults otherwise) and zeroed gradients; the
Trainers' gradient clipping and learning-rate schedule are left out of both. Tokenization is inside the timed step for
both arms. Both truncate pairs to 128 tokens (`pairzoo.train`'s default `--max_length`), train in float32 on
`--device`, in train mode (dropout on), from `torch.manual_seed(0)`.

The pairs: STS-B's train split (`pairzoo.training.data.load_dataset`) when the data folder (`--data_dir`, else the
shared one) holds it, else random sentences with random scores (a stand-in that needs no data, for tests); shuffled
once with a fixed seed and cut into full batches of `--batch_size`, which both arms take in turn from the start. A
tiny random backbone (`tiny-bert`, ...) has no pretrained folder for the `CrossEncoder` to load: pairzoo's model's
encoder and tokenizer are saved into a temporary one, so both arms start from the same encoder weights.

Timed with `benchmarks/timing.py`: one untimed warm-up round, then `--repeats` rounds calling each arm in turn (the
order reversed every other round), each call `--steps` training steps (CUDA synchronised around each call); the
per-step time is the median call over `--steps`. The last line is the time ratio of pairzoo's step to
sentence-transformers' (below 1: pairzoo's is faster). With `--output_dir`, the result is also written, atomically, to
`speed_train_step.json` there.

    python benchmarks/speed_train_step.py                                 # MiniLM, batch 16, 3 rounds of 20 steps
    python benchmarks/speed_train_step.py --steps 5 --repeats 2           # a quick check
    python benchmarks/speed_train_step.py --device cuda --output_dir benchmarks/results/train-step
"""

import json
import random
import sys
import tempfile
from dataclasses import dataclass, field
from itertools import cycle
from pathlib import Path

import torch

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))  # run from a checkout without installing pairzoo

from benchmarks.timing import interleaved, medians  # noqa: E402
from pairzoo import create_model, load_tokenizer  # noqa: E402
from pairzoo.backbones import TINY_BACKBONES, resolve_backbone  # noqa: E402
from pairzoo.console import check_at_least, parse_flags, run_command  # noqa: E402
from pairzoo.fileio import check_output_folder, write_text_atomic  # noqa: E402
from pairzoo.training.collators import make_collator  # noqa: E402
from pairzoo.training.data import dataset_files, load_dataset, resolve_data_dir  # noqa: E402

RESULT_FILE = "speed_train_step.json"
MAX_LENGTH = 128  # tokens per pair in both arms: pairzoo.train's default --max_length
LABEL_RANGE = (0.0, 5.0)  # STS-B's scale; sentence-transformers' arm gets the labels scaled to 0-1
LEARNING_RATE = 2e-5
SYNTHETIC_PAIRS = 256  # random pairs when there is no STS-B (at least one batch of --batch_size)
WORDS = (
    "a the man woman child dog cat bird plane car train boat guitar flute piano is are was playing riding eating "
    "running taking off on in at with near large small red blue old young street park river field kitchen"
).split()


@dataclass
class SpeedTrainStepArguments:
    """Flags of `benchmarks/speed_train_step.py`."""

    backbone: str = field(default="minilm", metadata={"help": "Backbone of both models (a pairzoo backbone name)."})
    batch_size: int = field(default=16, metadata={"help": "Pairs per training step."})
    steps: int = field(default=20, metadata={"help": "Timed training steps per arm in each round."})
    repeats: int = field(default=3, metadata={"help": "Timed rounds (the median round is reported)."})
    device: str = field(
        default_factory=lambda: "cuda" if torch.cuda.is_available() else "cpu",
        metadata={"help": "Device of both models: cpu, cuda or cuda:N (the default: cuda where there is one)."},
    )
    data_dir: "str | None" = field(
        default=None,
        metadata={"help": "Folder holding STS-B/ (default: the shared data folder); without STS-B, random pairs."},
    )
    output_dir: "str | None" = field(
        default=None, metadata={"help": f"Also write the result to {RESULT_FILE} in this folder (atomically)."}
    )


def parse_args(argv: "list[str] | None" = None) -> SpeedTrainStepArguments:
    """The flags in `argv`, checked: a positive `--batch_size`, `--steps` and `--repeats`, a CPU or an available CUDA
    `--device`, a writable `--output_dir`; each bad one is a ValueError naming it."""
    args = parse_flags(SpeedTrainStepArguments, argv, __doc__.split("\n\n")[0])
    check_at_least(args, 1, "batch_size", "steps", "repeats")
    check_device(args.device)
    if args.output_dir is not None:
        check_output_folder(args.output_dir, "--output_dir")
    return args


def check_device(name: str) -> None:
    """A ValueError naming `--device` unless `name` is `cpu` or a CUDA device this machine has."""
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise ValueError(f"`--device` {name!r} is not a device: {err}.") from err
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"`--device` must be cpu, cuda or cuda:N, got {name!r}.")
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"`--device` is {name!r} but this machine has no CUDA device.")
        if device.index is not None and device.index >= count:
            raise ValueError(f"`--device` is {name!r} but this machine has {count} CUDA device(s).")


def synthetic_rows(n: int, seed: int = 0) -> "list[dict]":
    """`n` rows of two random sentences (4-20 words of `WORDS`) and a random score on STS-B's 0-5 scale."""
    rng = random.Random(seed)

    def sentence() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 20))).capitalize() + "."

    return [
        {"sentence1": sentence(), "sentence2": sentence(), "label": round(rng.uniform(*LABEL_RANGE), 2)}
        for _ in range(n)
    ]


def training_rows(data_dir: "str | None", batch_size: int) -> "tuple[str, list[dict]]":
    """Which pairs and their rows (`sentence1`, `sentence2`, `label` on 0-5): STS-B's train split when the data folder
    (`data_dir`, else the shared one) holds it, else `SYNTHETIC_PAIRS` (at least `batch_size`) random ones. A
    `data_dir` that does not exist is a FileNotFoundError naming it."""
    try:
        folder = resolve_data_dir(data_dir)
    except FileNotFoundError:
        if data_dir is not None:
            raise
        folder = None
    if folder is not None and all((folder / name).is_file() for name in dataset_files("stsb", "train")):
        return "STS-B train", load_dataset("stsb", data_dir=folder, split="train")["train"].to_list()
    return "synthetic", synthetic_rows(max(SYNTHETIC_PAIRS, batch_size))


def reference_model(backbone: str, model: torch.nn.Module, tokenizer, device: str):
    """sentence-transformers' `CrossEncoder` (one label, `MAX_LENGTH` tokens) on `backbone`'s pretrained folder; a
    tiny random backbone, which has none, is first saved from `model`'s encoder with `tokenizer` into a temporary
    folder."""
    from sentence_transformers import CrossEncoder

    if backbone not in TINY_BACKBONES:
        return CrossEncoder(resolve_backbone(backbone), num_labels=1, device=device, max_length=MAX_LENGTH)
    with tempfile.TemporaryDirectory() as folder:
        model.backbone.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        return CrossEncoder(folder, num_labels=1, device=device, max_length=MAX_LENGTH)


def pairzoo_arm(model: torch.nn.Module, tokenizer, device: str, batches: "list[list[dict]]", steps: int):
    """A call that trains pairzoo's `model` for `steps` steps on the next `batches` (cycled), as `pairzoo.train`
    does: its collator tokenizes, the forward with `labels` returns the loss."""
    collator = make_collator(model, tokenizer, MAX_LENGTH, LABEL_RANGE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    upcoming = cycle(batches)

    def train() -> None:
        for _ in range(steps):
            batch = {name: tensor.to(device) for name, tensor in collator(next(upcoming)).items()}
            model(**batch).loss.backward()
            optimizer.step()
            optimizer.zero_grad()

    return train


def sentence_transformers_arm(cross_encoder, device: str, batches: "list[list[dict]]", steps: int):
    """A call that trains sentence-transformers' `cross_encoder` for `steps` steps on the next `batches` (cycled), as
    its `CrossEncoderTrainer` does with the default loss for one label: `CrossEncoderDataCollator`, then
    `BinaryCrossEntropyLoss` (which tokenizes the pairs) on the labels scaled to 0-1."""
    from sentence_transformers.cross_encoder.data_collator import CrossEncoderDataCollator
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss

    collator = CrossEncoderDataCollator(preprocess_fn=cross_encoder.preprocess)
    loss_fn = BinaryCrossEntropyLoss(cross_encoder)
    optimizer = torch.optim.AdamW(cross_encoder.parameters(), lr=LEARNING_RATE)
    low, high = LABEL_RANGE
    scaled = [[{**row, "label": (row["label"] - low) / (high - low)} for row in batch] for batch in batches]
    upcoming = cycle(scaled)

    def train() -> None:
        for _ in range(steps):
            batch = collator(next(upcoming))
            labels = batch.pop("label").to(device)
            loss_fn(list(batch.values()), labels).backward()
            optimizer.step()
            optimizer.zero_grad()

    return train


def main(argv: "list[str] | None" = None) -> dict:
    """Print both arms' median seconds per training step and their ratio; returns them with the settings (the record
    written to `--output_dir`)."""
    args = parse_args(argv)
    data, rows = training_rows(args.data_dir, args.batch_size)
    if len(rows) < args.batch_size:
        raise ValueError(f"`--batch_size` {args.batch_size} is larger than the {len(rows)} {data} pairs.")
    random.Random(0).shuffle(rows)
    batches = [rows[i : i + args.batch_size] for i in range(0, len(rows) - args.batch_size + 1, args.batch_size)]
    tokenizer = load_tokenizer(args.backbone)
    torch.manual_seed(0)
    model = create_model("cross-encoder", backbone=args.backbone, label_min=LABEL_RANGE[0], label_max=LABEL_RANGE[1])
    model.to(device=args.device, dtype=torch.float32).train()
    torch.manual_seed(0)
    plain = reference_model(args.backbone, model, tokenizer, args.device)
    plain.to(device=args.device, dtype=torch.float32).train()
    calls = {
        "pairzoo": pairzoo_arm(model, tokenizer, args.device, batches, args.steps),
        "sentence-transformers": sentence_transformers_arm(plain, args.device, batches, args.steps),
    }
    wall, _ = medians(interleaved(calls, warmup=1, repeats=args.repeats))
    per_step = {name: seconds / args.steps for name, seconds in wall.items()}
    ratio = per_step["pairzoo"] / per_step["sentence-transformers"]
    print(
        f"{len(rows)} {data} pairs, batch {args.batch_size}, {args.backbone}, {args.device} float32, "
        f"{torch.get_num_threads()} threads; tokenization inside the timed step"
    )
    for name, seconds in per_step.items():
        print(f"{name}: {seconds:.4f} s per step (median of {args.repeats} rounds of {args.steps} steps)")
    print(f"pairzoo / sentence-transformers training-step time ratio: {ratio:.3f}")
    result = {
        **per_step,
        "ratio": ratio,
        "backbone": args.backbone,
        "batch_size": args.batch_size,
        "steps": args.steps,
        "repeats": args.repeats,
        "device": args.device,
        "dtype": "float32",
        "data": data,
        "pairs": len(rows),
        "torch_threads": torch.get_num_threads(),
    }
    if args.output_dir is not None:
        write_text_atomic(Path(args.output_dir) / RESULT_FILE, json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    sys.exit(run_command("speed_train_step.py", main))
