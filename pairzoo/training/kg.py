"""Knowledge-graph completion with conditioned sentence embeddings (SimKGC formulation, as in the CSR paper).

The head entity's text is the sentence and the relation's name the condition; the tail entity's text is embedded
without a condition. Training: InfoNCE over in-batch negatives with an additive margin on the positive (0.02) and a
learnable temperature (initialised at 0.05), in both directions (query -> tail and tail -> query), in-batch false
negatives (same tail entity) masked, as intfloat/SimKGC does. Inverse triples `(tail, "inverse <relation>", head)` are
added to training and evaluation, as SimKGC does. Evaluation: filtered MRR and Hits@1/3/10, each query ranked against
all entities (40,943 for WN18RR), the other known answers (train and dev triples) and the query's own head entity
filtered out. Only dev is evaluated: test is held out.

`python -m pairzoo.train_kg --model csr --backbone minilm --config_overrides '{"architecture": "tri"}' --max_steps 300`
"""

import json
import math
import random
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn
from tqdm.auto import tqdm
from transformers import HfArgumentParser, get_linear_schedule_with_warmup, set_seed

from ..backbones import load_tokenizer
from ..pipelines.pipeline_conditional_similarity import encode_bi_inputs, encode_tri_inputs
from ..registry import create_model
from .data import load_dataset, load_kg_entities

INVERSE_PREFIX = "inverse "


def kg_examples(triples, add_inverse: bool = True) -> "list[dict]":
    """Rows `{head_id, head, relation, tail_id, tail}`, plus the inverse of each triple when `add_inverse`."""
    rows = [dict(r) for r in triples]
    if add_inverse:
        rows += [
            {
                "head_id": r["tail_id"],
                "head": r["tail"],
                "relation": INVERSE_PREFIX + r["relation"],
                "tail_id": r["head_id"],
                "tail": r["head"],
            }
            for r in triples
        ]
    return rows


@dataclass
class KgCollator:
    """Batches KG rows: the conditioned query `(head text | relation)` in the model's input format (`tri` or `bi`),
    the tail text alone (`tail_input_ids`, `tail_attention_mask`) and `tail_index` (the tail's row in the entity table,
    used to mask in-batch false negatives)."""

    tokenizer: object
    input_format: str
    entity_index: dict
    max_length: int = 64

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        if not rows:
            raise ValueError("cannot collate an empty batch.")
        if self.input_format not in ("tri", "bi"):
            raise ValueError(f"KG training needs a `tri` or `bi` model, got input_format {self.input_format!r}.")
        encode = encode_tri_inputs if self.input_format == "tri" else encode_bi_inputs
        heads, relations = [r["head"] for r in rows], [r["relation"] for r in rows]
        batch = encode(self.tokenizer, heads, None, relations, max_length=self.max_length)
        tails = self.tokenizer(
            [r["tail"] for r in rows], truncation=True, max_length=self.max_length, padding=True, return_tensors="pt"
        )
        batch["tail_input_ids"] = tails["input_ids"]
        batch["tail_attention_mask"] = tails["attention_mask"]
        batch["tail_index"] = torch.tensor([self.entity_index[r["tail_id"]] for r in rows], dtype=torch.long)
        return batch


class KgContrastiveModel(nn.Module):
    """A conditioned-embedding model with SimKGC's InfoNCE: additive margin and a learnable temperature."""

    def __init__(self, model: nn.Module, margin: float = 0.02, temperature: float = 0.05) -> None:
        super().__init__()
        if not 0 < temperature:
            raise ValueError(f"`temperature` must be > 0, got {temperature}.")
        self.model = model
        self.margin = margin
        self.log_inv_t = nn.Parameter(torch.tensor(math.log(1.0 / temperature)))

    def query_embeddings(self, batch: dict) -> torch.Tensor:
        """(B, d) normalised embeddings of `(head | relation)` queries."""
        inputs = {k: v for k, v in batch.items() if not k.startswith("tail_")}
        return nn.functional.normalize(self.model(**inputs).embeddings, dim=-1)

    def entity_embeddings(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, d) normalised embeddings of entity texts without a condition."""
        return nn.functional.normalize(self.model.embed_plain(input_ids, attention_mask), dim=-1)

    def forward(self, batch: dict) -> "tuple[torch.Tensor, torch.Tensor]":
        """InfoNCE loss (both directions) and the (B, B) training logits."""
        queries = self.query_embeddings(batch)
        tails = self.entity_embeddings(batch["tail_input_ids"], batch["tail_attention_mask"])
        logits = queries @ tails.T
        eye = torch.eye(len(logits), dtype=torch.bool, device=logits.device)
        logits = logits - self.margin * eye
        logits = logits * self.log_inv_t.exp().clamp(max=100.0)
        same_tail = batch["tail_index"].unsqueeze(0) == batch["tail_index"].unsqueeze(1)
        logits = logits.masked_fill(same_tail & ~eye, -1e4)
        labels = torch.arange(len(logits), device=logits.device)
        loss = nn.functional.cross_entropy(logits, labels) + nn.functional.cross_entropy(logits.T, labels)
        return loss, logits


@torch.no_grad()
def encode_entities(
    kg_model: KgContrastiveModel, tokenizer, texts: "list[str]", max_length: int = 64, batch_size: int = 256
) -> torch.Tensor:
    """(num_entities, d) normalised entity embeddings, batched, with a progress bar."""
    device = next(kg_model.parameters()).device
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths together: less padding
    out = torch.empty(len(texts), kg_model.model.config.backbone_config.hidden_size, device=device)
    for start in tqdm(range(0, len(texts), batch_size), desc="entities", unit="batch", mininterval=5):
        index = order[start : start + batch_size]
        batch = tokenizer(
            [texts[i] for i in index], truncation=True, max_length=max_length, padding=True, return_tensors="pt"
        )
        out[torch.tensor(index, device=device)] = kg_model.entity_embeddings(
            batch["input_ids"].to(device), batch["attention_mask"].to(device)
        )
    return out


def known_answers(rows: "list[dict]") -> "dict[tuple[str, str], set[str]]":
    """`(head_id, relation) -> {tail_id}` over `rows` (the filter of the filtered ranking)."""
    answers: dict = {}
    for r in rows:
        answers.setdefault((r["head_id"], r["relation"]), set()).add(r["tail_id"])
    return answers


@torch.no_grad()
def evaluate_kg(
    kg_model: KgContrastiveModel,
    tokenizer,
    queries: "list[dict]",
    entity_ids: "list[str]",
    entity_texts: "list[str]",
    known: "dict[tuple[str, str], set[str]]",
    input_format: str,
    max_length: int = 64,
    batch_size: int = 256,
) -> "dict[str, float]":
    """Filtered MRR and Hits@1/3/10 of `queries` ranked against every entity.

    Other known answers and the query's own head entity (unless it is the answer) are filtered out: an entity's text is
    trivially closest to itself, which would otherwise cap every rank at 2.
    """
    if not queries:
        raise ValueError("no evaluation queries.")
    kg_model.eval()
    entity_index = {e: i for i, e in enumerate(entity_ids)}
    entities = encode_entities(kg_model, tokenizer, entity_texts, max_length, batch_size)
    collator = KgCollator(tokenizer, input_format, entity_index, max_length)
    device = entities.device
    ranks = []
    for start in tqdm(range(0, len(queries), batch_size), desc="queries", unit="batch", mininterval=5):
        rows = queries[start : start + batch_size]
        batch = {k: v.to(device) for k, v in collator(rows).items()}
        scores = kg_model.query_embeddings(batch) @ entities.T
        targets = batch["tail_index"]
        for row, r in enumerate(rows):
            excluded = known.get((r["head_id"], r["relation"]), set()) | {r["head_id"]}
            others = [entity_index[t] for t in excluded if t != r["tail_id"]]
            if others:
                scores[row, others] = -math.inf
        target_scores = scores.gather(1, targets.unsqueeze(1))
        ranks += (1 + (scores > target_scores).sum(1)).tolist()
    ranks = torch.tensor(ranks, dtype=torch.float64)
    return {
        "mrr": float((1.0 / ranks).mean()),
        "hits@1": float((ranks <= 1).double().mean()),
        "hits@3": float((ranks <= 3).double().mean()),
        "hits@10": float((ranks <= 10).double().mean()),
        "num_queries": len(ranks),
        "num_entities": len(entity_ids),
    }


@dataclass
class KgArguments:
    """`python -m pairzoo.train_kg` options."""

    model: str = field(default="csr", metadata={"help": "Registered model name with a tri/bi input format."})
    backbone: str = field(default="minilm", metadata={"help": "minilm, tiny-bert, tiny-roberta, a folder or Hub id."})
    config_overrides: "str | None" = field(default=None, metadata={"help": "Model hyper-parameters as JSON."})
    data_dir: "str | None" = field(default=None, metadata={"help": "Shared data folder (default ../shared/data)."})
    output_dir: str = field(default="outputs/kg", metadata={"help": "Where metrics.json is written."})
    max_steps: int = field(default=300, metadata={"help": "Training steps."})
    batch_size: int = field(default=32, metadata={"help": "Training batch (in-batch negatives)."})
    learning_rate: float = field(default=5e-5, metadata={"help": "AdamW learning rate (linear decay)."})
    warmup_ratio: float = field(default=0.1, metadata={"help": "Fraction of steps of linear warm-up."})
    weight_decay: float = field(default=1e-4, metadata={"help": "AdamW weight decay."})
    max_length: int = field(default=64, metadata={"help": "Maximum tokens per entity text / query."})
    margin: float = field(default=0.02, metadata={"help": "Additive margin on the positive logit."})
    temperature: float = field(default=0.05, metadata={"help": "Initial temperature (learnable)."})
    add_inverse: bool = field(default=True, metadata={"help": "Add inverse triples to training and evaluation."})
    eval_queries: "int | None" = field(default=None, metadata={"help": "Evaluate the first N dev triples only."})
    eval_batch_size: int = field(default=256, metadata={"help": "Batch of entity encoding and query scoring."})
    seed: int = field(default=0, metadata={"help": "Seed of model init, data order and dropout."})


def run_kg(args: KgArguments) -> dict:
    """Train on WN18RR train, evaluate on (a prefix of) dev, write `<output_dir>/metrics.json`; returns the metrics."""
    if args.max_steps < 0 or args.batch_size < 2:
        raise ValueError("`max_steps` must be >= 0 and `batch_size` >= 2 (in-batch negatives).")
    overrides = json.loads(args.config_overrides) if args.config_overrides else {}
    set_seed(args.seed)
    data = load_dataset("wn18rr", data_dir=args.data_dir)
    entities = load_kg_entities(args.data_dir)
    entity_ids, entity_texts = list(entities["entity_id"]), list(entities["text"])
    entity_index = {e: i for i, e in enumerate(entity_ids)}
    model = create_model(args.model, backbone=args.backbone, **overrides)
    input_format = getattr(model, "input_format", "cross")
    tokenizer = load_tokenizer(args.backbone)
    kg_model = KgContrastiveModel(model, args.margin, args.temperature)
    train_rows = kg_examples(list(data["train"]), args.add_inverse)
    collator = KgCollator(tokenizer, input_format, entity_index, args.max_length)
    rng = random.Random(args.seed)
    order = list(range(len(train_rows)))
    rng.shuffle(order)
    optimizer = torch.optim.AdamW(kg_model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)
    scheduler = get_linear_schedule_with_warmup(
        optimizer, int(args.warmup_ratio * args.max_steps), max(args.max_steps, 1)
    )
    kg_model.train()
    started = time.time()
    losses = []
    for step in tqdm(range(args.max_steps), desc="train", unit="step", mininterval=10):
        index = [order[(step * args.batch_size + i) % len(order)] for i in range(args.batch_size)]
        loss, _ = kg_model(collator([train_rows[i] for i in index]))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(kg_model.parameters(), 10.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    train_seconds = time.time() - started
    dev = list(data["validation"])
    if args.eval_queries is not None:
        dev = dev[: args.eval_queries]
    queries = kg_examples(dev, args.add_inverse)
    known = known_answers(kg_examples(list(data["train"]) + list(data["validation"]), True))
    started = time.time()
    metrics = evaluate_kg(
        kg_model,
        tokenizer,
        queries,
        entity_ids,
        entity_texts,
        known,
        input_format,
        args.max_length,
        args.eval_batch_size,
    )
    result = {
        "args": asdict(args),
        "train_loss_last50": sum(losses[-50:]) / max(len(losses[-50:]), 1),
        "temperature": float(1.0 / kg_model.log_inv_t.exp()),
        "train_seconds": round(train_seconds, 1),
        "eval_seconds": round(time.time() - started, 1),
        "dev_triples": len(dev),
        "dev": metrics,
    }
    output = Path(args.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    (output / "metrics.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return result


def main(argv: "list[str] | None" = None) -> dict:
    """Parse `argv` into `KgArguments` and run."""
    (args,) = HfArgumentParser(KgArguments).parse_args_into_dataclasses(args=sys.argv[1:] if argv is None else argv)
    return run_kg(args)


__all__ = [
    "KgArguments",
    "KgCollator",
    "KgContrastiveModel",
    "encode_entities",
    "evaluate_kg",
    "kg_examples",
    "known_answers",
    "main",
    "run_kg",
]
