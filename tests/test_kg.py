"""Knowledge-graph completion (SimKGC recipe): the loss recomputed independently, the collator's known answers, the
filtered ranking on a hand-made graph and against brute force, a tiny end-to-end Trainer run whose export loads back,
and bad flags."""

import json
import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn
from transformers import set_seed

from pairzoo import create_model, load_tokenizer
from pairzoo.hub_cards import load_export
from pairzoo.train_kg import console_main
from pairzoo.training.kg import (
    KgArguments,
    KgCollator,
    KgContrastiveModel,
    encode_entities,
    evaluate_kg,
    kg_examples,
    known_answers,
    run_kg,
)

TEXTS = {
    "dog": "dog, a pet",
    "cat": "cat, a pet",
    "animal": "animal, a being",
    "oak": "oak, a tree",
    "tree": "tree, a plant",
    "plant": "plant, a living thing",
}
IDS = list(TEXTS)
INDEX = {e: i for i, e in enumerate(IDS)}


def _row(head: str, relation: str, tail: str) -> dict:
    return {"head_id": head, "head": TEXTS[head], "relation": relation, "tail_id": tail, "tail": TEXTS[tail]}


def _csr(**overrides) -> nn.Module:
    set_seed(0)
    return create_model("csr", backbone="tiny-bert", **overrides).eval()


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny-bert")


# --------------------------------------------------------------------------------------------- training loss

# the batch: "dog" and "cat" share the tail "animal"; "oak" has two known answers ("tree", "plant"), so "plant" in the
# batch is a false negative of the "oak" query; "tree -> plant" makes "tree" (the head of the 4th query) a known
# answer of "oak" too; "plant -hypernym-> plant" makes that query's head its own answer (self-negative masked).
BATCH = [
    _row("dog", "hypernym", "animal"),
    _row("cat", "hypernym", "animal"),
    _row("oak", "hypernym", "tree"),
    _row("tree", "hypernym", "plant"),
    _row("plant", "hypernym", "plant"),
]
GRAPH = BATCH + [_row("oak", "hypernym", "plant")]
QUEUE_IDS = ["plant", "dog", "tree"]  # pre-batch tails: "plant" and "tree" are known answers of "oak"


def _masked(mode: str, row: dict, candidate: str) -> bool:
    """Independent statement of the false-negative rule for one query and one candidate entity."""
    if mode == "none":
        return False
    if mode == "same_tail":
        return candidate == row["tail_id"]
    return candidate in {r["tail_id"] for r in GRAPH if (r["head_id"], r["relation"]) == (row["head_id"], "hypernym")}


@pytest.mark.parametrize(
    "mode, self_negatives, pre_batch", [("known", True, 1), ("same_tail", False, 1), ("none", True, 0)]
)
def test_loss_recomputed_from_the_parameters(tokenizer, mode, self_negatives, pre_batch):
    model = _csr()
    kg = KgContrastiveModel(
        model, 0.02, 0.05, pre_batch=pre_batch, batch_size=3, self_negatives=self_negatives, false_negatives=mode
    ).eval()
    with torch.no_grad():
        kg.log_inv_t.fill_(math.log(1 / 0.07))  # the loss must read the parameter, not the initial 0.05
    batch = KgCollator(tokenizer, "tri", INDEX, 32, known_answers(GRAPH))(BATCH)
    queue = torch.nn.functional.normalize(torch.randn(3, model.config.backbone_config.hidden_size), dim=-1)
    if pre_batch:
        kg.queue, kg.queue_index = queue, torch.tensor([INDEX[e] for e in QUEUE_IDS])
    with torch.no_grad():
        out = kg(**batch)
        query = {k: v for k, v in batch.items() if not k.startswith(("tail_", "head_", "known_"))}
        q = torch.nn.functional.normalize(model(**query).embeddings).double()
        t = torch.nn.functional.normalize(model.embed_plain(batch["tail_input_ids"], batch["tail_attention_mask"]))
        h = torch.nn.functional.normalize(model.embed_plain(batch["head_input_ids"], batch["head_attention_mask"]))
    t, h, queue = t.double(), h.double(), queue.double()
    tau, gamma = 0.07, 0.02
    loss = 0.0
    in_batch = torch.empty(len(BATCH), len(BATCH), dtype=torch.float64)
    for i, row in enumerate(BATCH):
        logits = []
        for j, other in enumerate(BATCH):
            value = (float(q[i] @ t[j]) - (gamma if i == j else 0.0)) / tau
            in_batch[i, j] = -1e4 if i != j and _masked(mode, row, other["tail_id"]) else value
            logits.append(in_batch[i, j].item())
        if pre_batch:
            logits += [
                -1e4 if _masked(mode, row, e) else 0.5 * float(q[i] @ queue[k]) / tau for k, e in enumerate(QUEUE_IDS)
            ]
        if self_negatives:
            logits.append(-1e4 if _masked(mode, row, row["head_id"]) else float(q[i] @ h[i]) / tau)
        logits = torch.tensor(logits, dtype=torch.float64)
        loss += -(logits[i] - torch.logsumexp(logits, 0)) / len(BATCH)
    for j in range(len(BATCH)):  # tail -> query, over the in-batch logits only
        loss += -(in_batch[j, j] - torch.logsumexp(in_batch[:, j], 0)) / len(BATCH)
    width = len(BATCH) + 3 * pre_batch + self_negatives
    assert out.logits.shape == (len(BATCH), width)
    assert (out.logits <= -1e4).sum() > 0 if mode != "none" else (out.logits <= -1e4).sum() == 0
    torch.testing.assert_close(out.loss.double(), loss, atol=1e-5, rtol=1e-5)
    assert torch.equal(kg.queue, queue.float()) if pre_batch else kg.queue is None  # eval mode: queue unchanged


def test_pre_batch_queue_keeps_the_last_detached_tails(tokenizer):
    kg = KgContrastiveModel(_csr(), pre_batch=2, batch_size=2).train()
    collator = KgCollator(tokenizer, "tri", INDEX, 32, known_answers(GRAPH))
    batches = [collator(BATCH[i : i + 2]) for i in (0, 2, 4)]  # sizes 2, 2, 1
    widths = []
    for batch in batches:
        out = kg(**batch)
        out.loss.backward()
        widths.append(out.logits.shape[1])
        assert torch.equal(kg.queue[: len(out.tail_embeddings)], out.tail_embeddings.detach())
        assert not kg.queue.requires_grad
    assert widths == [2, 2 + 2, 1 + 4]  # in-batch, then the queue of at most pre_batch * batch_size tails
    assert kg.queue_index.tolist() == [INDEX["plant"], INDEX["tree"], INDEX["plant"], INDEX["animal"]]
    assert kg.log_inv_t.grad is not None and kg.log_inv_t.grad != 0
    frozen = KgContrastiveModel(_csr(), learn_temperature=False)
    assert not frozen.log_inv_t.requires_grad


def test_collator_lists_known_answers_own_tail_first(tokenizer):
    batch = KgCollator(tokenizer, "bi", INDEX, 32, known_answers(GRAPH))(BATCH[2:4])
    assert batch["known_index"].tolist() == [[INDEX["tree"], INDEX["plant"]], [INDEX["plant"], -1]]
    assert batch["head_index"].tolist() == [INDEX["oak"], INDEX["tree"]]
    assert {"sentence_mask", "condition_mask", "tail_input_ids", "head_input_ids"} <= set(batch)
    unknown = KgCollator(tokenizer, "tri", INDEX, 32)(BATCH[2:4])  # no graph: only the own tail
    assert unknown["known_index"].tolist() == [[INDEX["tree"]], [INDEX["plant"]]]
    with pytest.raises(ValueError, match="input_format 'cross'"):
        KgCollator(tokenizer, "cross", INDEX)(BATCH)
    with pytest.raises(ValueError, match="empty batch"):
        KgCollator(tokenizer, "tri", INDEX)([])


def test_kg_examples_add_inverse_triples():
    rows = kg_examples([_row("oak", "hypernym", "tree")])
    assert [(r["head_id"], r["relation"], r["tail_id"]) for r in rows] == [
        ("oak", "hypernym", "tree"),
        ("tree", "inverse hypernym", "oak"),
    ]
    assert rows[1]["head"] == TEXTS["tree"] and len(kg_examples(rows[:1], add_inverse=False)) == 1


# --------------------------------------------------------------------------------------------- filtered ranking


class _PlaneModel(nn.Module):
    """Entities are hand-set unit vectors at given angles (by the word's token); queries by (head, relation)."""

    def __init__(self, tokenizer, entities: dict, queries: dict) -> None:
        super().__init__()
        self.anchor = nn.Parameter(torch.zeros(()))  # gives the model a device
        self.config = SimpleNamespace(backbone_config=SimpleNamespace(hidden_size=2))
        token = lambda word: tokenizer(word)["input_ids"][1]  # noqa: E731
        self.entities = {token(w): self._unit(a) for w, a in entities.items()}
        self.queries = {(token(h), token(r)): self._unit(a) for (h, r), a in queries.items()}

    @staticmethod
    def _unit(degrees: float) -> torch.Tensor:
        return torch.tensor([math.cos(math.radians(degrees)), math.sin(math.radians(degrees))])

    def embed_plain(self, input_ids, attention_mask):
        return torch.stack([self.entities[int(i)] for i in input_ids[:, 1]])

    def forward(self, input_ids, input_ids_3, **kwargs):
        keys = zip(input_ids[:, 1].tolist(), input_ids_3[:, 1].tolist())
        return SimpleNamespace(embeddings=torch.stack([self.queries[k] for k in keys]))


def test_filtered_ranks_on_a_hand_made_graph(tokenizer):
    angles = {"dog": 0, "cat": 10, "tree": 20, "car": 30, "house": 40}
    queries = [
        ("dog", "part", "car"),  # ahead: dog (head, excluded), cat (known answer, filtered), tree -> rank 2
        ("tree", "part", "house"),  # ahead: cat, car; dog ties with house (3 or 4: realistic 3.5); tree excluded
        ("cat", "similar", "cat"),  # the head is the answer: not excluded -> rank 1
    ]
    model = _PlaneModel(tokenizer, angles, {("dog", "part"): 0, ("tree", "part"): 20, ("cat", "similar"): 10})
    kg = KgContrastiveModel(model)
    rows = [{"head_id": h, "head": h, "relation": r, "tail_id": t, "tail": t} for h, r, t in queries]
    known = known_answers(rows + [{**rows[0], "tail_id": "cat"}])
    ids = list(angles)
    metrics = evaluate_kg(kg, tokenizer, rows, ids, ids, known, "tri", max_length=8, batch_size=2)
    assert metrics["mrr"] == pytest.approx((1 / 2 + 1 / 3.5 + 1) / 3)
    assert (metrics["hits@1"], metrics["hits@3"], metrics["hits@10"]) == pytest.approx((1 / 3, 2 / 3, 1.0))
    assert metrics["mrr_optimistic"] == pytest.approx((1 / 2 + 1 / 3 + 1) / 3) and metrics["tied_queries"] == 1
    assert metrics["hits@3_optimistic"] == pytest.approx(1.0)
    assert (metrics["num_queries"], metrics["num_entities"]) == (3, 5)
    unfiltered = evaluate_kg(kg, tokenizer, rows[:1], ids, ids, {}, "tri", max_length=8)
    assert unfiltered["mrr"] == pytest.approx(1 / 3)  # cat is no longer filtered; the head still is


def test_filtered_ranks_recomputed_by_brute_force(tokenizer):
    kg = KgContrastiveModel(_csr())
    texts = list(TEXTS.values())
    queries = [_row("dog", "hypernym", "animal"), _row("oak", "hypernym", "tree"), _row("tree", "hypernym", "plant")]
    known = known_answers(queries + [_row("dog", "hypernym", "cat")])  # "cat" is another known answer for "dog"
    metrics = evaluate_kg(kg, tokenizer, queries, IDS, texts, known, "tri", max_length=32, batch_size=2)
    entities = encode_entities(kg, tokenizer, texts, 32)
    with torch.no_grad():
        batch = KgCollator(tokenizer, "tri", INDEX, 32)(queries)
        q = kg.query_embeddings({k: v for k, v in batch.items() if not k.startswith(("tail_", "head_", "known_"))})
    ranks = []
    for row, query in zip(q, queries):
        scores = {e: float(row @ entities[i]) for i, e in enumerate(IDS)}
        excluded = ({query["head_id"]} | known[(query["head_id"], query["relation"])]) - {query["tail_id"]}
        ranks.append(1 + sum(s > scores[query["tail_id"]] for e, s in scores.items() if e not in excluded))
    assert metrics["mrr"] == pytest.approx(sum(1 / r for r in ranks) / 3)
    assert metrics["hits@1"] == pytest.approx(sum(r <= 1 for r in ranks) / 3)
    assert metrics["num_entities"] == 6 and metrics["num_queries"] == 3


# --------------------------------------------------------------------------------------------- end to end


def _write_graph(root) -> str:
    """A small WN18RR-shaped graph under `root/WN18RR`; returns `root` (the --data_dir)."""
    folder = root / "WN18RR"
    folder.mkdir(parents=True)
    (folder / "entity2text.txt").write_text("".join(f"{e}\t{t}\n" for e, t in TEXTS.items()))
    (folder / "relation2text.txt").write_text("_hypernym\thypernym\n_similar_to\tsimilar to\n")
    train = [("dog", "_hypernym", "animal"), ("cat", "_hypernym", "animal"), ("oak", "_hypernym", "tree")]
    train += [("tree", "_hypernym", "plant"), ("dog", "_similar_to", "cat"), ("oak", "_similar_to", "tree")]
    (folder / "train.tsv").write_text("".join("\t".join(t) + "\n" for t in train))
    (folder / "dev.tsv").write_text("cat\t_similar_to\tdog\nanimal\t_hypernym\tplant\n")
    return str(root)


@pytest.mark.parametrize("architecture", ["tri", "bi"])
def test_trainer_run_writes_an_export_that_loads_back(tmp_path, architecture):
    args = KgArguments(
        backbone="tiny-bert",
        config_overrides=json.dumps({"architecture": architecture}),
        data_dir=_write_graph(tmp_path / "data"),
        output_dir=str(tmp_path / "out"),
        max_steps=4,
        batch_size=4,
        max_length=16,
        learning_rate=1e-3,
        pre_batch=1,
        eval_steps=2,
        logging_steps=1,
        eval_batch_size=4,
    )
    result = run_kg(args)
    saved = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert saved["dev"] == pytest.approx(result["dev"]) and saved["args"]["pre_batch"] == 1
    assert saved["dev"]["num_queries"] == 4 and saved["dev"]["num_entities"] == 6 and 0 < saved["dev"]["mrr"] <= 1
    assert saved["train_steps"] == 4 and saved["environment"]["world_size"] == 1 and saved["environment"]["torch"]
    assert saved["stopped_by_time_budget"] is False
    assert [e["step"] for e in saved["log_history"] if "eval_mrr" in e] == [2, 4]  # the Trainer's evaluation hook
    model, tokenizer = load_export(tmp_path / "out" / "export")
    assert model.config.architecture == architecture
    fresh = _csr(architecture=architecture)
    assert any(not torch.equal(a, b) for a, b in zip(model.state_dict().values(), fresh.state_dict().values()))
    rows = kg_examples([_row("cat", "similar to", "dog"), _row("animal", "hypernym", "plant")])
    graph = kg_examples(
        [_row(h, r, t) for h, r, t in [("dog", "hypernym", "animal"), ("cat", "hypernym", "animal")]]
        + [_row(h, r, t) for h, r, t in [("oak", "hypernym", "tree"), ("tree", "hypernym", "plant")]]
        + [_row(h, r, t) for h, r, t in [("dog", "similar to", "cat"), ("oak", "similar to", "tree")]]
        + rows[:2]
    )
    again = evaluate_kg(
        KgContrastiveModel(model.eval()),
        tokenizer,
        rows,
        IDS,
        list(TEXTS.values()),
        known_answers(graph),
        architecture,
        max_length=16,
    )
    assert again["mrr"] == pytest.approx(saved["dev"]["mrr"], abs=1e-6, rel=1e-5)


def test_time_budget_stops_training_then_evaluates_and_saves(tmp_path):
    args = KgArguments(
        backbone="tiny-bert",
        data_dir=_write_graph(tmp_path / "data"),
        output_dir=str(tmp_path / "out"),
        max_steps=50,
        max_train_seconds=1e-9,  # spent by the end of the first step
        batch_size=4,
        max_length=16,
        eval_batch_size=4,
        export=False,
    )
    result = run_kg(args)
    saved = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert result["train_steps"] == saved["train_steps"] == 1 and saved["stopped_by_time_budget"] is True
    assert saved["dev"]["num_queries"] == 4 and 0 < saved["dev"]["mrr"] <= 1


def test_batches_built_by_worker_processes_train_the_same_model(tmp_path):
    data_dir = _write_graph(tmp_path / "data")
    common = dict(backbone="tiny-bert", data_dir=data_dir, max_steps=3, batch_size=4, max_length=16, export=False)
    common.update(eval_batch_size=4, learning_rate=1e-3)
    inline = run_kg(KgArguments(output_dir=str(tmp_path / "inline"), **common))
    workers = run_kg(KgArguments(output_dir=str(tmp_path / "workers"), dataloader_num_workers=2, **common))
    assert workers["args"]["dataloader_num_workers"] == 2 and workers["train_steps"] == 3
    assert workers["train_loss"] == pytest.approx(inline["train_loss"], rel=1e-5, abs=1e-6)
    assert workers["dev"]["mrr"] == pytest.approx(inline["dev"]["mrr"], rel=1e-5, abs=1e-6)


# --------------------------------------------------------------------------------------------- bad flags

BAD_FLAGS = [
    (["--max_steps", "0"], "--max_steps"),
    (["--batch_size", "1"], "--batch_size"),
    (["--temperature", "0"], "--temperature"),
    (["--margin", "nan"], "--margin"),
    (["--pre_batch", "-1"], "--pre_batch"),
    (["--dataloader_num_workers", "-1"], "--dataloader_num_workers"),
    (["--pre_batch_weight", "0"], "--pre_batch_weight"),
    (["--warmup_ratio", "1"], "--warmup_ratio"),
    (["--max_train_seconds", "-1"], "--max_train_seconds"),
    (["--eval_queries", "0"], "--eval_queries"),
    (["--false_negatives", "tails"], "--false_negatives"),
    (["--config_overrides", "[1]"], "config_overrides"),
    (["--config_overrides", '{"architecture": "cross"}'], "architecture"),
    (["--model", "cross-encoder"], "--model cross-encoder"),
    (["--data_dir", "MISSING"], "does not exist"),
]


@pytest.mark.parametrize("flags, named", BAD_FLAGS, ids=[f[0][0] + "=" + f[0][1] for f in BAD_FLAGS])
def test_bad_flags_fail_with_one_line_and_write_nothing(tmp_path, capsys, flags, named):
    data_dir = _write_graph(tmp_path / "data")
    out = tmp_path / "out"
    flags = [f if f != "MISSING" else str(tmp_path / "missing") for f in flags]
    argv = ["--backbone", "tiny-bert", "--data_dir", data_dir, "--output_dir", str(out), "--max_steps", "2", *flags]
    assert console_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pairzoo.train_kg: error: ") and named in err and "\n" not in err
    assert not out.exists()
