"""CSR caches and knowledge-graph link prediction at their edges: duplicate texts and every batch size give the
forward's embeddings in the callers' order, cache files whose tensors disagree in shape are refused by name, a
relation named like another's inverse is refused before anything is written, and duplicate queries and entities
whose texts coincide are ranked as the filtered protocol says."""

import math
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import save_file
from torch import nn
from transformers import set_seed

from pairzoo import create_model, load_tokenizer
from pairzoo.csr_cache import load_cache, save_cache
from pairzoo.modeling.modeling_csr import ConditionCache, SentenceCache
from pairzoo.pipelines.pipeline_conditional_similarity import encode_tri_inputs
from pairzoo.train_kg import console_main
from pairzoo.training.kg import KgContrastiveModel, evaluate_kg, kg_examples, known_answers

SENTENCES = ["a dog runs", "the man is playing a long guitar song tonight", "a dog runs", "x", "a dog runs"]
CONDITIONS = ["the colour", "the animal", "the colour"]


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny-bert")


@pytest.fixture(scope="module")
def model():
    set_seed(0)
    return create_model("csr", backbone="tiny-bert", architecture="tri", router_layers=[1], tri_head="hadamard").eval()


# --------------------------------------------------------------------------------------------- CSR cache


@pytest.mark.parametrize("batch_size", [1, 2, 5, 64])
def test_duplicate_texts_and_every_batch_size_give_the_forward_embeddings_in_order(model, tokenizer, batch_size):
    sentences = model.encode_sentences(SENTENCES, tokenizer, batch_size=batch_size)
    conditions = model.encode_conditions(CONDITIONS, tokenizer, batch_size=batch_size)
    cached = model.embed(sentences, conditions, batch_size=batch_size)
    assert cached.shape == (len(SENTENCES), len(CONDITIONS), model.config.backbone_config.hidden_size)
    with torch.no_grad():
        for j, condition in enumerate(CONDITIONS):
            direct = model(**encode_tri_inputs(tokenizer, SENTENCES, None, [condition] * len(SENTENCES))).embeddings
            torch.testing.assert_close(cached[:, j], direct, atol=1e-5, rtol=0)
    # duplicates are the same rows wherever they stand
    torch.testing.assert_close(cached[0], cached[2], atol=1e-6, rtol=0)
    torch.testing.assert_close(cached[:, 0], cached[:, 2], atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    "case, match",
    [
        ("fewer_mask_rows", "must be \\(N, L, d\\) and \\(N, L\\)"),
        ("shorter_mask", "must be \\(N, L, d\\) and \\(N, L\\)"),
        ("mask_of_twos", "only 0 and 1"),
        ("integer_hidden_states", "floating point"),
        ("fewer_feature_rows", "must be \\(N, T, d\\) and \\(N, d or 0\\)"),
        ("integer_queries", "floating point"),
    ],
)
def test_a_cache_whose_tensors_disagree_is_refused_by_name_on_load_and_on_save(
    model, tokenizer, tmp_path, case, match
):
    sentences = model.encode_sentences(SENTENCES, tokenizer)
    conditions = model.encode_conditions(CONDITIONS, tokenizer)
    hidden, mask = sentences.hidden_states, sentences.attention_mask
    queries, features = conditions.queries, conditions.features
    bad = {
        "fewer_mask_rows": lambda: SentenceCache(hidden, mask[:3], sentences.metadata),
        "shorter_mask": lambda: SentenceCache(hidden, mask[:, :-1], sentences.metadata),
        "mask_of_twos": lambda: SentenceCache(hidden, mask * 2, sentences.metadata),
        "integer_hidden_states": lambda: SentenceCache(hidden.long(), mask, sentences.metadata),
        "fewer_feature_rows": lambda: ConditionCache(queries, features[:2], conditions.metadata),
        "integer_queries": lambda: ConditionCache(queries.long(), features, conditions.metadata),
    }[case]()
    path = tmp_path / "cache.safetensors"
    with pytest.raises(ValueError, match=match):
        save_cache(bad, path)
    assert not path.exists()
    kind = "sentence" if isinstance(bad, SentenceCache) else "condition"
    save_file({k: v.contiguous() for k, v in bad.tensors().items()}, str(path), metadata=model._cache_metadata(kind))
    with pytest.raises(ValueError, match=f"cache file '{path}' is corrupt: its .*{match}"):
        load_cache(path)


def test_a_consistent_cache_round_trips_and_embeds_alike(model, tokenizer, tmp_path):
    sentences = model.encode_sentences(SENTENCES, tokenizer)
    conditions = model.encode_conditions(CONDITIONS, tokenizer)
    again = model.embed(
        load_cache(save_cache(sentences, tmp_path / "s.safetensors")),
        load_cache(save_cache(conditions, tmp_path / "c.safetensors")),
    )
    torch.testing.assert_close(again, model.embed(sentences, conditions), atol=1e-6, rtol=0)


# --------------------------------------------------------------------------------------------- knowledge graph


def _row(head: str, relation: str, tail: str) -> dict:
    return {"head_id": head, "head": head, "relation": relation, "tail_id": tail, "tail": tail}


def test_a_relation_named_like_another_relations_inverse_is_refused():
    triples = [_row("a", "hypernym", "b"), _row("b", "inverse hypernym", "e")]
    with pytest.raises(ValueError, match="relation 'inverse hypernym' has the name --add_inverse gives the inverse"):
        kg_examples(triples, add_inverse=True)
    # without inverse triples the two relations stay apart: `e` is the only answer of (b, inverse hypernym)
    assert known_answers(kg_examples(triples, add_inverse=False))[("b", "inverse hypernym")] == {"e"}


def _write_graph(folder, relations: "dict[str, str]") -> None:
    folder.mkdir(parents=True)
    entities = {"dog": "dog, an animal", "cat": "cat, an animal", "animal": "animal, a living thing", "oak": "oak"}
    (folder / "entity2text.txt").write_text("".join(f"{e}\t{t}\n" for e, t in entities.items()))
    (folder / "relation2text.txt").write_text("".join(f"{r}\t{t}\n" for r, t in relations.items()))
    (folder / "train.tsv").write_text("dog\t_a\tanimal\ncat\t_a\tanimal\n")
    (folder / "dev.tsv").write_text("animal\t_b\toak\n")


def test_the_cli_refuses_a_relation_named_like_an_inverse_and_writes_nothing(tmp_path, capsys):
    _write_graph(tmp_path / "kg", {"_a": "hypernym", "_b": "inverse hypernym"})
    out = tmp_path / "out"
    argv = ["--backbone", "tiny-bert", "--kg_dir", str(tmp_path / "kg"), "--output_dir", str(out)]
    assert console_main([*argv, "--max_steps", "1", "--batch_size", "2", "--max_length", "16"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pairzoo.train_kg: error: relation 'inverse hypernym'")
    assert not out.exists()


class _TableModel(nn.Module):
    """Entity embeddings set by hand per word (its first token); every query embeds as (1, 0), so an entity's score
    is its first coordinate."""

    def __init__(self, tokenizer, entities: dict) -> None:
        super().__init__()
        self.anchor = nn.Parameter(torch.zeros(()))  # gives the model a device
        self.config = SimpleNamespace(backbone_config=SimpleNamespace(hidden_size=2))
        self.entities = {tokenizer(w)["input_ids"][1]: torch.tensor(v) for w, v in entities.items()}

    def embed_plain(self, input_ids, attention_mask):
        return torch.stack([self.entities[int(i)] for i in input_ids[:, 1]])

    def forward(self, input_ids, **kwargs):
        return SimpleNamespace(embeddings=torch.tensor([1.0, 0.0]).expand(len(input_ids), 2))


def _point(x: float) -> "tuple[float, float]":
    return (x, math.sqrt(1 - x * x))


def test_coinciding_texts_tie_and_duplicate_or_unseen_queries_count_each_time(tokenizer):
    # ids e1..e5; e2 and e3 share the text "cat" (one score), e5 ("bird") appears in no training triple
    ids = ["e1", "e2", "e3", "e4", "e5"]
    texts = ["dog", "cat", "cat", "tree", "bird"]
    model = _TableModel(tokenizer, {"dog": _point(0.9), "cat": _point(0.5), "tree": _point(0.1), "bird": _point(0.3)})

    def query(head, tail):
        return {
            "head_id": head,
            "head": texts[ids.index(head)],
            "relation": "part",
            "tail_id": tail,
            "tail": texts[ids.index(tail)],
        }

    queries = [
        query("e4", "e2"),  # dog above, e3 ties (same text): optimistic 2, pessimistic 3 -> 2.5
        query("e4", "e2"),  # the same dev triple again counts again
        query("e1", "e5"),  # head e1 excluded; e2, e3 above: rank 3; e5 unseen in training is still a candidate
    ]
    metrics = evaluate_kg(KgContrastiveModel(model), tokenizer, queries, ids, texts, known_answers(queries), "tri", 8)
    realistic, optimistic = [2.5, 2.5, 3.0], [2, 2, 3]
    assert metrics["mrr"] == pytest.approx(sum(1 / r for r in realistic) / 3)
    assert metrics["mrr_optimistic"] == pytest.approx(sum(1 / r for r in optimistic) / 3)
    assert metrics["hits@1"] == 0.0 and metrics["hits@3"] == 1.0
    assert (metrics["tied_queries"], metrics["num_queries"], metrics["num_entities"]) == (2, 3, 5)
    # e3 as a known answer of the query is filtered: e2 no longer ties
    known = known_answers([*queries, query("e4", "e3")])
    filtered = evaluate_kg(KgContrastiveModel(model), tokenizer, queries[:1], ids, texts, known, "tri", 8)
    assert filtered["mrr"] == pytest.approx(0.5) and filtered["tied_queries"] == 0


def test_a_cache_of_a_model_whose_router_weights_differ_is_refused(tokenizer):
    set_seed(0)
    heavy = create_model("csr", backbone="tiny-bert", router="heavy", router_layers=[1]).eval()
    conditions = heavy.encode_conditions(CONDITIONS, tokenizer)
    sentences = heavy.encode_sentences(SENTENCES, tokenizer)
    other = create_model("csr", backbone="tiny-bert", router="heavy", router_layers=[1]).eval()
    other.load_state_dict(heavy.state_dict())
    with torch.no_grad():
        next(p for n, p in other.named_parameters() if not n.startswith("backbone.")).add_(0.5)
    with pytest.raises(ValueError, match="built by a different model: weights"):
        other.embed(sentences, conditions)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64])
def test_embed_reads_a_cache_in_the_models_dtype(tokenizer, dtype):
    set_seed(0)
    model = create_model("csr", backbone="tiny-bert", router_layers=[1], tri_head="hadamard").eval()
    model.to(dtype)  # weights exactly representable in both dtypes: the same fingerprint after `.float()`
    model.float()
    sentences = model.to(dtype).encode_sentences(SENTENCES, tokenizer)
    conditions = model.encode_conditions(CONDITIONS, tokenizer)
    embedded = model.float().embed(sentences, conditions)
    assert embedded.dtype == torch.float32
    own = model.encode_sentences(SENTENCES, tokenizer), model.encode_conditions(CONDITIONS, tokenizer)
    expected = model.embed(*own)
    tolerance = 5e-2 if dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(embedded, expected, atol=tolerance, rtol=tolerance)
    assert model.to(torch.float64).embed(sentences, conditions).dtype == torch.float64


def test_a_link_prediction_export_states_its_ranking_metrics_in_the_card(tokenizer, tmp_path):
    from pairzoo.hub_cards import export_model

    metrics = {"mrr": 14.69, "hits@1": 8.5, "hits@3": 15.0, "hits@10": 30.1}
    model = create_model("csr", backbone="tiny-bert", architecture="tri").eval()
    results = [{"dataset": "wn18rr", "split": "validation", "metrics": metrics}]
    card = (export_model(model, tokenizer, tmp_path / "export", eval_results=results) / "README.md").read_text()
    for name, value in metrics.items():
        assert f"- type: {name}\n      value: {value}\n" in card
        assert f"| wn18rr | validation | {name} | {value:.2f} |" in card
