"""Knowledge-graph completion with conditioned sentence embeddings: the SimKGC recipe (Wang et al. 2022, "SimKGC:
Simple Contrastive Knowledge Graph Completion with Pre-trained Language Models"; code intfloat/SimKGC), as the CSR
paper trains it, through `transformers.Trainer`.

The head entity's text is the sentence and the relation's name the condition; tail (and head) entity texts are
embedded without a condition (`CsrModel.embed_plain`), by the same shared encoder (SimKGC uses two encoders).
Training loss, each part switchable to compare with the earlier trainer (in-batch negatives, same-tail masking only):

- InfoNCE over in-batch negatives with an additive margin `gamma` subtracted from the positive cosine and a learnable
  temperature (`log(1/tau)` a parameter, initialised at tau = 0.05), in both directions: query -> tail over all
  negatives, tail -> query over the in-batch ones (SimKGC's trainer).
- Pre-batch negatives (`pre_batch` > 0): the detached tail embeddings of the previous `pre_batch` batches, their
  logits weighted by `pre_batch_weight` (SimKGC: 0.5). Slots not filled yet are masked (SimKGC fills them with random
  vectors); each process keeps its own queue.
- Self-negatives (`self_negatives`): the query's own head entity as one more negative.
- False negatives masked (`false_negatives="known"`): a candidate is masked when it is a known answer of the query's
  `(head, relation)` in the training graph, in the batch, in the pre-batch queue and as a self-negative (SimKGC's
  `construct_mask`); `"same_tail"` masks only the same tail entity (the earlier trainer), `"none"` nothing.

Inverse triples `(tail, "inverse <relation>", head)` are added to training and evaluation, as SimKGC does.
Evaluation: filtered MRR and Hits@1/3/10, each query ranked against all entities (40,943 for WN18RR), the other known
answers (train and dev triples) and the query's own head entity filtered out; a target tied with other candidates
gets the realistic rank, the mean of its optimistic and pessimistic rank (Sun et al. 2020, "A Re-evaluation of
Knowledge Graph Completion Methods"), and the optimistic figures and the tied queries are reported beside it (see
`evaluate_kg`); only dev is evaluated (test is held out). It is the Trainer's `evaluate` (so `--eval_steps` gives
dev MRR during training); every process ranks all queries. The run ends with `<output_dir>/export` (the trained
`CsrModel`, as every `pairzoo.train` run) and `<output_dir>/metrics.json` (dev metrics, arguments and environment),
both written atomically.

`python -m pairzoo.train_kg --model csr --backbone minilm --config_overrides '{"architecture": "tri"}' --max_steps 300`
(`accelerate launch -m pairzoo.train_kg ...` on several processes).
"""

import math
import platform
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import transformers
from torch import nn
from tqdm.auto import tqdm
from transformers import TrainerCallback, TrainingArguments, set_seed
from transformers.utils import ModelOutput

from ..backbones import load_tokenizer
from ..configuration.common import check_max_length
from ..console import ConsoleArguments, OneLineErrorParser
from ..fileio import write_text_atomic
from ..metrics import load_metric
from ..pipelines.pipeline_conditional_similarity import encode_bi_inputs, encode_tri_inputs
from ..registry import create_model
from .cli import (
    GuardedTrainer,
    NonFiniteLossError,
    check_number,
    check_output_dir,
    check_world_size,
    claimed_output_dir,
    has_accelerator,
    parse_overrides,
    strict_json,
    undefined_metrics,
    undefined_to_none,
    unpin_memory_without_accelerator,
)
from .data import load_dataset, load_kg_entities, load_kg_folder

INVERSE_PREFIX = "inverse "
FALSE_NEGATIVE_MODES = ("known", "same_tail", "none")
MASKED = -1e4  # SimKGC's masked logit


def kg_examples(triples, add_inverse: bool = True) -> "list[dict]":
    """Rows `{head_id, head, relation, tail_id, tail}`, plus the inverse of each triple when `add_inverse` (its
    relation prefixed with `INVERSE_PREFIX`). A relation already named like the inverse of another (`hypernym` and
    `inverse hypernym`) is then a ValueError: the two relations' triples would be indistinguishable, mixed in the
    known answers that mask negatives and filter the ranking."""
    rows = [dict(r) for r in triples]
    if add_inverse:
        relations = {r["relation"] for r in rows}
        clash = sorted(r for r in relations if INVERSE_PREFIX + r in relations)
        if clash:
            raise ValueError(
                f"relation {INVERSE_PREFIX + clash[0]!r} has the name --add_inverse gives the inverse of relation "
                f"{clash[0]!r}, so their triples would be mixed; rename it (relation2text.txt) or pass "
                "--add_inverse False."
            )
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


def known_answers(rows: "list[dict]") -> "dict[tuple[str, str], set[str]]":
    """`(head_id, relation) -> {tail_id}` over `rows` (the false-negative mask and the ranking filter)."""
    answers: dict = {}
    for r in rows:
        answers.setdefault((r["head_id"], r["relation"]), set()).add(r["tail_id"])
    return answers


@dataclass
class KgCollator:
    """Batches KG rows: the conditioned query `(head text | relation)` in the model's input format (`tri` or `bi`),
    the tail and head texts alone (`tail_input_ids`, `tail_attention_mask`, `head_input_ids`, `head_attention_mask`),
    their rows in the entity table (`tail_index`, `head_index`) and `known_index` (B, K): the entity rows of the known
    answers of each query's `(head, relation)` in `known` (always including its own tail), padded with -1."""

    tokenizer: object
    input_format: str
    entity_index: dict
    max_length: int = 64
    known: "dict[tuple[str, str], set[str]] | None" = None

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        if not rows:
            raise ValueError("cannot collate an empty batch.")
        if self.input_format not in ("tri", "bi"):
            raise ValueError(f"KG training needs a `tri` or `bi` model, got input_format {self.input_format!r}.")
        encode = encode_tri_inputs if self.input_format == "tri" else encode_bi_inputs
        heads, relations = [r["head"] for r in rows], [r["relation"] for r in rows]
        batch = encode(self.tokenizer, heads, None, relations, max_length=self.max_length)
        for side in ("tail", "head"):
            texts = self.tokenizer(
                [r[side] for r in rows], truncation=True, max_length=self.max_length, padding=True, return_tensors="pt"
            )
            batch[f"{side}_input_ids"] = texts["input_ids"]
            batch[f"{side}_attention_mask"] = texts["attention_mask"]
            batch[f"{side}_index"] = torch.tensor([self.entity_index[r[f"{side}_id"]] for r in rows])
        answers = [
            sorted({self.entity_index[t] for t in (self.known or {}).get((r["head_id"], r["relation"]), ())} - {i})
            for r, i in zip(rows, batch["tail_index"].tolist())
        ]
        width = 1 + max(len(a) for a in answers)
        batch["known_index"] = torch.tensor(
            [[i, *a] + [-1] * (width - 1 - len(a)) for i, a in zip(batch["tail_index"].tolist(), answers)]
        )
        return batch


def is_known(known_index: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
    """(B, C) bool: whether entity row `candidates[j]` is among the known answers `known_index[i]` (-1: padding)."""
    width = int(torch.maximum(known_index.max(), candidates.max())) + 1
    offsets = torch.arange(len(known_index), device=known_index.device).unsqueeze(1) * width
    known_keys = (known_index + offsets)[known_index >= 0]
    return torch.isin(candidates.unsqueeze(0) + offsets, known_keys) & (candidates >= 0)


@dataclass
class KgOutput(ModelOutput):
    r"""
    Output of [`KgContrastiveModel`].

    Args:
        loss (`torch.FloatTensor` of shape `()`): InfoNCE, query -> tail over all negatives plus tail -> query over
            the in-batch ones.
        logits (`torch.FloatTensor` of shape `(batch_size, batch_size + num_pre_batch + self_negatives)`): scaled
            logits (margin on the diagonal, masked false negatives at -1e4): in-batch tails, pre-batch queue, own head.
        query_embeddings (`torch.FloatTensor` of shape `(batch_size, hidden_size)`): normalised query embeddings.
        tail_embeddings (`torch.FloatTensor` of shape `(batch_size, hidden_size)`): normalised tail embeddings.
    """

    loss: "torch.FloatTensor | None" = None
    logits: "torch.FloatTensor | None" = None
    query_embeddings: "torch.FloatTensor | None" = None
    tail_embeddings: "torch.FloatTensor | None" = None


class KgContrastiveModel(nn.Module):
    """A conditioned-embedding model (`CsrModel`) with SimKGC's contrastive loss (see the module docstring).

    `pre_batch` previous batches of at most `batch_size` tails are kept as extra negatives, weighted by
    `pre_batch_weight`; `self_negatives` adds the head entity; `false_negatives` selects the mask
    (`known`, `same_tail`, `none`); `learn_temperature=False` freezes tau.
    """

    accepts_loss_kwargs = False  # the loss is a mean over the batch: the Trainer scales it for accumulation

    def __init__(
        self,
        model: nn.Module,
        margin: float = 0.02,
        temperature: float = 0.05,
        learn_temperature: bool = True,
        pre_batch: int = 0,
        pre_batch_weight: float = 0.5,
        batch_size: int = 32,
        self_negatives: bool = False,
        false_negatives: str = "known",
    ) -> None:
        super().__init__()
        if not temperature > 0:
            raise ValueError(f"`temperature` must be > 0, got {temperature}.")
        if false_negatives not in FALSE_NEGATIVE_MODES:
            raise ValueError(f"`false_negatives` must be one of {FALSE_NEGATIVE_MODES}, got {false_negatives!r}.")
        self.model = model
        self.margin = margin
        self.log_inv_t = nn.Parameter(torch.tensor(math.log(1.0 / temperature)), requires_grad=learn_temperature)
        self.pre_batch_size = pre_batch * batch_size
        self.pre_batch_weight = pre_batch_weight
        self.self_negatives = self_negatives
        self.false_negatives = false_negatives
        self.reset_queue()

    def reset_queue(self) -> None:
        """Empty the pre-batch queue (plain attributes, not buffers: each process keeps its own; DDP syncs none)."""
        self.queue: torch.Tensor | None = None
        self.queue_index: torch.Tensor | None = None

    def query_embeddings(self, query: dict) -> torch.Tensor:
        """(B, d) normalised embeddings of `(head | relation)` queries (the model's input keys)."""
        return nn.functional.normalize(self.model(**query).embeddings, dim=-1)

    def entity_embeddings(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, d) normalised embeddings of entity texts without a condition."""
        return nn.functional.normalize(self.model.embed_plain(input_ids, attention_mask), dim=-1)

    def _false_negative_mask(
        self, tail_index: torch.Tensor, known_index: torch.Tensor, candidates: torch.Tensor
    ) -> torch.Tensor:
        """(B, C) bool: candidate entity rows masked as false negatives of each query."""
        if self.false_negatives == "none":
            return torch.zeros(len(tail_index), len(candidates), dtype=torch.bool, device=tail_index.device)
        if self.false_negatives == "same_tail":
            return tail_index.unsqueeze(1) == candidates.unsqueeze(0)
        return is_known(known_index, candidates)

    def forward(
        self,
        tail_input_ids: torch.Tensor,
        tail_attention_mask: torch.Tensor,
        tail_index: torch.Tensor,
        head_input_ids: "torch.Tensor | None" = None,
        head_attention_mask: "torch.Tensor | None" = None,
        head_index: "torch.Tensor | None" = None,
        known_index: "torch.Tensor | None" = None,
        **query: torch.Tensor,
    ) -> KgOutput:
        """The training loss of one `KgCollator` batch; in training mode the batch's tails then enter the queue."""
        if known_index is None:
            known_index = tail_index.unsqueeze(1)
        queries = self.query_embeddings(query)
        tails = self.entity_embeddings(tail_input_ids, tail_attention_mask)
        inv_t = self.log_inv_t.exp()
        eye = torch.eye(len(queries), dtype=torch.bool, device=queries.device)
        in_batch = (queries @ tails.T - self.margin * eye) * inv_t
        in_batch = in_batch.masked_fill(self._false_negative_mask(tail_index, known_index, tail_index) & ~eye, MASKED)
        parts = [in_batch]
        if self.pre_batch_size and self.queue is not None:
            pre = (queries @ self.queue.T) * inv_t * self.pre_batch_weight
            parts.append(pre.masked_fill(self._false_negative_mask(tail_index, known_index, self.queue_index), MASKED))
        if self.self_negatives:
            if head_input_ids is None or head_index is None:
                raise ValueError("self-negatives need `head_input_ids`, `head_attention_mask` and `head_index`.")
            heads = self.entity_embeddings(head_input_ids, head_attention_mask)
            own = (queries * heads).sum(-1, keepdim=True) * inv_t
            parts.append(
                own.masked_fill(
                    self._false_negative_mask(tail_index, known_index, head_index).diagonal().unsqueeze(1), MASKED
                )
            )
        logits = torch.cat(parts, dim=1)
        labels = torch.arange(len(queries), device=queries.device)
        loss = nn.functional.cross_entropy(logits, labels) + nn.functional.cross_entropy(in_batch.T, labels)
        if self.training and self.pre_batch_size:
            queue = tails.detach() if self.queue is None else torch.cat([tails.detach(), self.queue])
            index = tail_index if self.queue_index is None else torch.cat([tail_index, self.queue_index])
            self.queue, self.queue_index = queue[: self.pre_batch_size], index[: self.pre_batch_size]
        return KgOutput(loss=loss, logits=logits, query_embeddings=queries, tail_embeddings=tails)


@torch.no_grad()
def encode_entities(
    kg_model: KgContrastiveModel, tokenizer, texts: "list[str]", max_length: int = 64, batch_size: int = 256
) -> torch.Tensor:
    """(num_entities, d) normalised entity embeddings, batched by similar lengths, with a progress bar.

    Each distinct token sequence (after truncation to `max_length`) is encoded once and shared, so entities whose
    truncated texts are identical get bitwise identical embeddings: their scores tie exactly in `evaluate_kg`.
    """
    device = next(kg_model.parameters()).device
    unique: dict[tuple[int, ...], int] = {}
    inverse = [
        unique.setdefault(tuple(ids), len(unique))
        for ids in tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
    ]
    sequences = list(unique)
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))  # similar lengths together: less padding
    pad_id = tokenizer.pad_token_id or 0
    out = torch.empty(len(sequences), kg_model.model.config.backbone_config.hidden_size, device=device)
    for start in tqdm(range(0, len(sequences), batch_size), desc="entities", unit="batch", mininterval=5):
        index = order[start : start + batch_size]
        width = max(len(sequences[i]) for i in index)
        input_ids = torch.full((len(index), width), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(index), width), dtype=torch.long)
        for row, i in enumerate(index):
            input_ids[row, : len(sequences[i])] = torch.tensor(sequences[i], dtype=torch.long)
            attention_mask[row, : len(sequences[i])] = 1
        out[torch.tensor(index, device=device)] = kg_model.entity_embeddings(
            input_ids.to(device), attention_mask.to(device)
        ).to(out.dtype)
    return out[torch.tensor(inverse, dtype=torch.long, device=device)]


def check_relations_tokenize_apart(tokenizer, relations: "Iterable[str]", backbone: str) -> None:
    """A ValueError naming both relations unless the tokenizer gives each relation text (the condition of its
    queries) its own tokens: an uncased tokenizer reads `Hypernym` and `hypernym` as one text, so the model could not
    tell the two relations' queries apart (relation2text.txt refuses only texts that are equal as written)."""
    seen: dict[tuple, str] = {}
    for text in sorted(set(relations)):
        ids = tuple(tokenizer(text, add_special_tokens=False)["input_ids"])
        if ids in seen:
            raise ValueError(
                f"relations {seen[ids]!r} and {text!r} are the same tokens for the tokenizer of --backbone "
                f"{backbone!r}, so the model could not tell their queries apart; give each relation its own text "
                "(relation2text.txt)."
            )
        seen[ids] = text


def check_kg_max_length(
    max_length: int,
    tokenizer,
    input_format: str,
    relations: "Iterable[str]" = (),
    backbone_config=None,
    name: str = "max_length",
) -> None:
    """A ValueError naming `name` unless `max_length` tokens hold some of every text KG completion encodes.

    The rule: every entity text (and, in the `tri` format, each head and relation) is encoded alone as
    `[CLS] text [SEP]`, so `max_length` must leave at least one token after the tokenizer's special tokens (with 2
    of them, `max_length` >= 3; below that every entity is the same `[CLS][SEP]` and every score ties); in the `bi`
    format the query `[CLS] head [SEP] relation [SEP]` never truncates the relation, so the longest of `relations`
    plus one head token must fit. `max_length` above the backbone's position limit (`backbone_config`, when given)
    is refused by `check_max_length`. Two distinct entities whose truncated texts coincide are allowed (WN18RR
    lemmas can share a name); they tie, and `evaluate_kg` ranks ties realistically.
    """
    check_max_length(max_length, backbone_config, name)
    special = tokenizer.num_special_tokens_to_add(pair=False)
    if max_length < special + 1:
        raise ValueError(
            f"`{name}` is {max_length}, which leaves no token of an entity's text next to the tokenizer's {special} "
            f"special tokens (every entity would be encoded alike); use a value >= {special + 1}."
        )
    if input_format == "bi":
        relations = sorted(set(relations))
        lengths = [len(ids) for ids in tokenizer([" " + r for r in relations], add_special_tokens=False)["input_ids"]]
        longest = max(range(len(relations)), key=lengths.__getitem__, default=None)
        if longest is not None and lengths[longest] + 4 > max_length:
            raise ValueError(
                f"`{name}` is {max_length}, too short for the bi format's query `[CLS] head [SEP] relation [SEP]`: "
                f"the relation {relations[longest]!r} has {lengths[longest]} tokens and is never truncated; use a "
                f"value >= {lengths[longest] + 4}."
            )


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
    """Filtered MRR and Hits@1/3/10 of `queries` ranked against every entity, ties ranked realistically.

    Filtered setting: other known answers and the query's own head entity (unless it is the answer) are removed from
    the candidates (an entity's text is trivially closest to itself, which would otherwise cap every rank at 2).
    Ties, the protocol of Sun et al. 2020 ("A Re-evaluation of Knowledge Graph Completion Methods"): with `greater`
    candidates scored above the target and `tied` others scoring exactly the same, the optimistic rank is
    `1 + greater`, the pessimistic `1 + greater + tied`, and the reported rank is their mean (the expected rank
    under a random order of the tied candidates). `mrr` and `hits@k` are computed from that realistic rank;
    `mrr_optimistic` and `hits@k_optimistic` from the optimistic one (ties in the target's favour, what many
    published evaluations do), and `tied_queries` / `tied_fraction` count the queries whose target tied with another
    candidate, so one evaluation shows how far the protocol moves the figures. Scores are cosines computed in
    float32 (outside autocast), as bf16 scores would tie far more often. `max_length` is checked by
    `check_kg_max_length`; a NaN score is a `NonFiniteLossError`. Leaves `kg_model` in eval mode (the Trainer's
    training step sets train mode again).
    """
    if not queries:
        raise ValueError("no evaluation queries.")
    check_kg_max_length(max_length, tokenizer, input_format, (r["relation"] for r in queries))
    kg_model.eval()
    entity_index = {e: i for i, e in enumerate(entity_ids)}
    entities = encode_entities(kg_model, tokenizer, entity_texts, max_length, batch_size).float()
    # score each distinct embedding once: identical entities get bitwise identical scores, so their ties are exact
    distinct, columns = torch.unique(entities, dim=0, return_inverse=True)
    collator = KgCollator(tokenizer, input_format, entity_index, max_length)
    device = entities.device
    optimistic, tied = [], []
    for start in tqdm(range(0, len(queries), batch_size), desc="queries", unit="batch", mininterval=5):
        rows = queries[start : start + batch_size]
        batch = {k: v.to(device) for k, v in collator(rows).items() if not k.startswith(("tail_", "head_", "known_"))}
        query_embeddings = kg_model.query_embeddings(batch).float()
        with torch.autocast(device.type, enabled=False):
            scores = (query_embeddings @ distinct.T)[:, columns]
        if torch.isnan(scores).any():
            raise NonFiniteLossError("the model's dev scores are NaN; their ranks would be meaningless.")
        targets = torch.tensor([entity_index[r["tail_id"]] for r in rows], device=device)
        for row, r in enumerate(rows):
            excluded = known.get((r["head_id"], r["relation"]), set()) | {r["head_id"]}
            others = [entity_index[t] for t in excluded if t != r["tail_id"]]
            if others:
                scores[row, others] = -math.inf
        target_scores = scores.gather(1, targets.unsqueeze(1))
        optimistic += (1 + (scores > target_scores).sum(1)).tolist()
        tied += ((scores == target_scores).sum(1) - 1).tolist()  # filtered candidates (-inf) never tie
    realistic = [rank + ties / 2 for rank, ties in zip(optimistic, tied)]
    ranking = load_metric("ranking")
    num_tied = sum(t > 0 for t in tied)
    return {
        **ranking.compute(predictions=realistic, ks=(1, 3, 10)),
        **{f"{k}_optimistic": v for k, v in ranking.compute(predictions=optimistic, ks=(1, 3, 10)).items()},
        "tied_queries": num_tied,
        "tied_fraction": num_tied / len(realistic),
        "num_queries": len(realistic),
        "num_entities": len(entity_ids),
    }


@dataclass
class KgEvaluation:
    """What `evaluate_kg` ranks: dev queries against all entities, filtered by `known` (train and dev answers), ties
    ranked realistically (`mrr`, `hits@k`) with the optimistic figures and tied queries beside them."""

    tokenizer: object
    queries: list
    entity_ids: list
    entity_texts: list
    known: dict
    input_format: str
    max_length: int = 64
    batch_size: int = 256

    def __call__(self, kg_model: KgContrastiveModel) -> "dict[str, float]":
        return evaluate_kg(
            kg_model,
            self.tokenizer,
            self.queries,
            self.entity_ids,
            self.entity_texts,
            self.known,
            self.input_format,
            self.max_length,
            self.batch_size,
        )


class KgTrainer(GuardedTrainer):
    """`Trainer` whose evaluation is the filtered ranking of `kg_evaluation` (logged as `<prefix>_mrr`, ...)."""

    def __init__(self, *args, kg_evaluation: KgEvaluation, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.kg_evaluation = kg_evaluation

    def train(self, *args, **kwargs):
        self.model.reset_queue()  # a new run starts with an empty pre-batch queue
        return super().train(*args, **kwargs)

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval") -> "dict[str, float]":
        started = time.time()
        with self.autocast_smart_context_manager():
            ranking = self.kg_evaluation(self.model)
        metrics = {f"{metric_key_prefix}_{k}": v for k, v in ranking.items()}
        metrics[f"{metric_key_prefix}_runtime"] = round(time.time() - started, 2)
        self.log(dict(metrics))  # `log` adds the epoch to the dict it is given
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics


class TimeBudgetCallback(TrainerCallback):
    """Stops training at the first step that ends `seconds` or more after training began; the run then evaluates and
    saves as usual. The learning-rate schedule is still the one for `max_steps`, so a stopped run has not decayed."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = time.time()

    def on_step_end(self, args, state, control, **kwargs):
        if time.time() - self.started >= self.seconds:
            control.should_training_stop = True


@dataclass
class KgArguments:
    """`python -m pairzoo.train_kg` options."""

    model: str = field(default="csr", metadata={"help": "Registered model name with a tri/bi input format."})
    backbone: str = field(default="minilm", metadata={"help": "minilm, tiny-bert, tiny-roberta, a folder or Hub id."})
    config_overrides: "str | None" = field(default=None, metadata={"help": "Model hyper-parameters as JSON."})
    data_dir: "str | None" = field(
        default=None, metadata={"help": "Shared data folder (default ../shared/data); its WN18RR/ folder is read."}
    )
    kg_dir: "str | None" = field(
        default=None,
        metadata={
            "help": "Your own knowledge graph instead of WN18RR: a folder in the WN18RR layout, entity2text.txt and "
            "relation2text.txt (id<TAB>text a line), train.tsv and dev.tsv (test.tsv optional; "
            "head_id<TAB>relation_id<TAB>tail_id a line)."
        },
    )
    output_dir: str = field(default="outputs/kg", metadata={"help": "Where metrics.json and export/ are written."})
    max_steps: int = field(default=300, metadata={"help": "Training steps."})
    max_train_seconds: float = field(
        default=0.0,
        metadata={"help": "Stop training after this many seconds, then evaluate and save as usual (0: no limit)."},
    )
    batch_size: int = field(default=32, metadata={"help": "Training batch per process (in-batch negatives)."})
    learning_rate: float = field(default=5e-5, metadata={"help": "AdamW learning rate (linear decay)."})
    warmup_ratio: float = field(default=0.1, metadata={"help": "Fraction of steps of linear warm-up."})
    weight_decay: float = field(default=1e-4, metadata={"help": "AdamW weight decay."})
    max_grad_norm: float = field(default=10.0, metadata={"help": "Gradient clipping norm (SimKGC: 10)."})
    max_length: int = field(
        default=64,
        metadata={
            "help": "Maximum tokens per entity text / query: at least one text token beside the special tokens "
            "(bi: the longest relation beside one head token), at most the backbone's position limit."
        },
    )
    margin: float = field(default=0.02, metadata={"help": "Additive margin subtracted from the positive cosine."})
    temperature: float = field(default=0.05, metadata={"help": "Initial temperature tau."})
    learn_temperature: bool = field(default=True, metadata={"help": "Learn log(1/tau) (SimKGC --finetune-t)."})
    pre_batch: int = field(default=2, metadata={"help": "Previous batches whose tails are negatives (0: none)."})
    pre_batch_weight: float = field(default=0.5, metadata={"help": "Weight of the pre-batch logits."})
    self_negatives: bool = field(default=True, metadata={"help": "The query's head entity as a negative."})
    false_negatives: str = field(
        default="known",
        metadata={"help": "Masked negatives: known (answers of (head, relation) in train), same_tail, or none."},
    )
    add_inverse: bool = field(default=True, metadata={"help": "Add inverse triples to training and evaluation."})
    eval_queries: "int | None" = field(default=None, metadata={"help": "Evaluate the first N dev triples only."})
    eval_batch_size: int = field(default=256, metadata={"help": "Batch of entity encoding and query scoring."})
    eval_steps: int = field(default=0, metadata={"help": "Also evaluate dev every N steps (0: only at the end)."})
    logging_steps: int = field(default=50, metadata={"help": "Log the training loss every N steps."})
    bf16: bool = field(default=False, metadata={"help": "bfloat16 mixed precision (on a GPU)."})
    dataloader_num_workers: int = field(
        default=0,
        metadata={
            "help": "Processes that build training batches beside the training loop (0: the loop builds them; the "
            "collator tokenises three texts a row). On a GPU, use enough that batches keep up with the steps."
        },
    )
    seed: int = field(default=0, metadata={"help": "Seed of model init, data order and dropout."})
    export: bool = field(
        default=True,
        metadata={"help": "Write the Hub export folder <output_dir>/export (--no_export: only metrics.json)."},
    )


def _validate(args: KgArguments) -> None:
    """Every flag's range, before anything is loaded or written (`--max_length` against the tokenizer and backbone
    is `check_kg_max_length`'s, once they are loaded)."""
    for name, minimum in (("max_steps", 1), ("batch_size", 2), ("max_length", 1), ("eval_batch_size", 1)):
        check_number(name, getattr(args, name), f"an integer >= {minimum}", lambda v, m=minimum: v >= m)
    for name in ("pre_batch", "eval_steps", "dataloader_num_workers"):
        check_number(name, getattr(args, name), "an integer >= 0", lambda v: v >= 0)
    check_number("logging_steps", args.logging_steps, "an integer >= 1", lambda v: v >= 1)
    if args.eval_queries is not None:
        check_number("eval_queries", args.eval_queries, "an integer >= 1", lambda v: v >= 1)
    for name in ("learning_rate", "temperature", "pre_batch_weight"):
        check_number(name, getattr(args, name), "a number > 0", lambda v: v > 0)
    for name in ("margin", "weight_decay", "max_grad_norm", "max_train_seconds"):
        check_number(name, getattr(args, name), "a number >= 0", lambda v: v >= 0)
    check_number("warmup_ratio", args.warmup_ratio, "in [0, 1)", lambda v: 0 <= v < 1)
    check_number("seed", args.seed, "an integer in [0, 2**32)", lambda v: 0 <= v < 2**32)
    if args.false_negatives not in FALSE_NEGATIVE_MODES:
        raise ValueError(
            f"`--false_negatives` must be one of {', '.join(FALSE_NEGATIVE_MODES)}, got {args.false_negatives!r}."
        )
    if args.bf16 and not has_accelerator():
        raise ValueError("`--bf16` needs a GPU or another accelerator; none was found.")
    if args.kg_dir is not None and args.data_dir is not None:
        raise ValueError(
            "`--kg_dir` and `--data_dir` are mutually exclusive: --kg_dir is your knowledge graph's folder, "
            "--data_dir the shared data folder whose WN18RR/ is read without it."
        )


def _environment(training_args: TrainingArguments) -> dict:
    """Versions and hardware of this run (for the results JSON)."""
    device = training_args.device
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "platform": platform.platform(),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else device.type,
        "world_size": training_args.world_size,
        "torch_threads": torch.get_num_threads(),
        "bf16": training_args.bf16,
    }


def run_kg(args: KgArguments) -> dict:
    """Train on WN18RR train (or the knowledge graph in `--kg_dir`, same layout) with `transformers.Trainer`,
    evaluate filtered ranks on (a prefix of) dev, write `<output_dir>/export` and `<output_dir>/metrics.json`;
    returns the results. Nothing is written before every check passes, and a failure removes what the run
    created."""
    _validate(args)
    overrides = parse_overrides(args.config_overrides)
    check_output_dir(args.output_dir)
    if args.kg_dir is not None:
        data, where = load_kg_folder(args.kg_dir), f"--kg_dir {args.kg_dir!r}"
    else:
        data, where = load_dataset("wn18rr", data_dir=args.data_dir), "WN18RR under --data_dir"
    for split in ("train", "validation"):
        if split not in data or len(data[split]) == 0:
            raise ValueError(f"{where} needs a non-empty {split!r} split (train.tsv, dev.tsv).")
    entities = load_kg_entities(args.data_dir, args.kg_dir)
    entity_ids, entity_texts = list(entities["entity_id"]), list(entities["text"])
    entity_index = {e: i for i, e in enumerate(entity_ids)}
    set_seed(args.seed)
    model = create_model(args.model, backbone=args.backbone, **overrides)
    input_format = getattr(model, "input_format", "cross")
    if input_format not in ("tri", "bi") or not hasattr(model, "embed_plain"):
        raise ValueError(
            f"`--model {args.model}` reads {input_format!r} inputs; KG completion needs a model that embeds the "
            "(head | relation) query and plain entity texts (csr, tri or bi architecture)."
        )
    tokenizer = load_tokenizer(args.backbone)
    train_rows = kg_examples(list(data["train"]), args.add_inverse)
    dev = list(data["validation"])[: args.eval_queries]
    evaluation = KgEvaluation(
        tokenizer,
        kg_examples(dev, args.add_inverse),
        entity_ids,
        entity_texts,
        known_answers(kg_examples(list(data["train"]) + list(data["validation"]), args.add_inverse)),
        input_format,
        args.max_length,
        args.eval_batch_size,
    )
    check_relations_tokenize_apart(tokenizer, (r["relation"] for r in train_rows + evaluation.queries), args.backbone)
    check_kg_max_length(
        args.max_length,
        tokenizer,
        input_format,
        (r["relation"] for r in train_rows + evaluation.queries),
        getattr(model.config, "backbone_config", None),
        "--max_length",
    )
    kg_model = KgContrastiveModel(
        model,
        margin=args.margin,
        temperature=args.temperature,
        learn_temperature=args.learn_temperature,
        pre_batch=args.pre_batch,
        pre_batch_weight=args.pre_batch_weight,
        batch_size=args.batch_size,
        self_negatives=args.self_negatives,
        false_negatives=args.false_negatives,
    )
    training_args = TrainingArguments(
        output_dir=args.output_dir,
        max_steps=args.max_steps,
        per_device_train_batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        warmup_steps=round(args.warmup_ratio * args.max_steps),
        weight_decay=args.weight_decay,
        max_grad_norm=args.max_grad_norm,
        lr_scheduler_type="linear",
        logging_steps=args.logging_steps,
        eval_strategy="steps" if args.eval_steps else "no",
        eval_steps=args.eval_steps or None,
        save_strategy="no",
        report_to="none",
        remove_unused_columns=False,
        bf16=args.bf16,
        dataloader_num_workers=args.dataloader_num_workers,
        use_cpu=not has_accelerator(),
        seed=args.seed,
        disable_tqdm=True,
    )
    unpin_memory_without_accelerator(training_args)
    check_world_size(training_args)
    collator = KgCollator(tokenizer, input_format, entity_index, args.max_length, known_answers(train_rows))
    with claimed_output_dir(args.output_dir, training_args):
        trainer = KgTrainer(
            model=kg_model,
            args=training_args,
            train_dataset=train_rows,
            eval_dataset=evaluation.queries,  # ranked by `KgTrainer.evaluate`, not batched through the collator
            data_collator=collator,
            processing_class=tokenizer,
            kg_evaluation=evaluation,
        )
        if args.max_train_seconds:
            trainer.add_callback(TimeBudgetCallback(args.max_train_seconds))
        started = time.time()
        train_output = trainer.train()
        train_seconds = time.time() - started
        started = time.time()
        metrics = {
            k.removeprefix("validation_"): v for k, v in trainer.evaluate(metric_key_prefix="validation").items()
        }
        if not math.isfinite(train_output.training_loss):
            raise NonFiniteLossError(f"training loss is {train_output.training_loss}; nothing was written.")
        # an undefined dev metric is logged and recorded as null; the trained run is kept
        undefined = undefined_metrics(metrics)
        metrics = undefined_to_none(metrics)
        dev_metrics = {k: v for k, v in metrics.items() if k != "runtime"}
        result = {
            "args": asdict(args),
            "train_loss": train_output.training_loss,
            "train_steps": trainer.state.global_step,
            "stopped_by_time_budget": trainer.state.global_step < args.max_steps,
            "train_rows": len(train_rows),
            "temperature": float(1.0 / kg_model.log_inv_t.detach().exp()),
            "train_seconds": round(train_seconds, 1),
            "eval_seconds": round(time.time() - started, 1),
            "dev_triples": len(dev),
            "dev": dev_metrics,
            "log_history": trainer.state.log_history,
            "environment": _environment(training_args),
        }
        if trainer.is_world_process_zero():
            output_dir = Path(args.output_dir)
            if args.export:
                from ..hub_cards import export_model

                kg_name = Path(args.kg_dir).resolve().name if args.kg_dir is not None else "wn18rr"

                ranking = {k: dev_metrics[k] for k in ("mrr", "hits@1", "hits@3", "hits@10") if k not in undefined}
                export_model(
                    kg_model.model,
                    tokenizer,
                    output_dir / "export",
                    eval_results=[{"dataset": kg_name, "split": "validation", "metrics": ranking}],
                    base_model=args.backbone,
                    overwrite=True,
                    training=_kg_recipe(args, kg_name, result),
                )
                result["export_dir"] = str(output_dir / "export")
            write_text_atomic(output_dir / "metrics.json", strict_json(result))
            print(strict_json({k: result[k] for k in ("dev", "train_loss", "temperature", "train_seconds")}))
    return result


def _kg_recipe(args: KgArguments, kg_name: str, result: dict) -> dict:
    """The run's recipe for the export's model card (`export_model(training=...)`); `max_length` is also the length
    the card's snippets truncate queries and entity texts to, as training and evaluation did."""
    return {
        "dataset": kg_name,
        "backbone": args.backbone,
        "train_rows": result["train_rows"],
        "max_steps": args.max_steps,
        "train_steps": result["train_steps"],
        "batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "warmup": f"{args.warmup_ratio:g} of the training steps",
        "weight_decay": args.weight_decay,
        "max_grad_norm": args.max_grad_norm,
        "max_length": args.max_length,
        "margin": args.margin,
        "initial_temperature": args.temperature,
        "learn_temperature": args.learn_temperature,
        "pre_batch": args.pre_batch,
        "pre_batch_weight": args.pre_batch_weight,
        "self_negatives": args.self_negatives,
        "false_negatives": args.false_negatives,
        "add_inverse": args.add_inverse,
        "seed": args.seed,
        "bf16": args.bf16,
    }


def parse_args(argv: "list[str] | None" = None) -> KgArguments:
    """`KgArguments` of `argv` (default `sys.argv[1:]`)."""
    parser = OneLineErrorParser((KgArguments, ConsoleArguments), prog="python -m pairzoo.train_kg")
    args, _ = parser.parse_args_into_dataclasses(args=sys.argv[1:] if argv is None else argv)
    return args


def main(argv: "list[str] | None" = None) -> dict:
    """Parse `argv` into `KgArguments` and run."""
    return run_kg(parse_args(argv))


__all__ = [
    "KgArguments",
    "KgCollator",
    "KgContrastiveModel",
    "KgEvaluation",
    "KgOutput",
    "KgTrainer",
    "TimeBudgetCallback",
    "check_kg_max_length",
    "check_relations_tokenize_apart",
    "encode_entities",
    "evaluate_kg",
    "is_known",
    "kg_examples",
    "known_answers",
    "main",
    "parse_args",
    "run_kg",
]
