"""Expressiveness of [MASK] representations: Recall@k and Precision@k (neighbor-attention paper, section 6.1,
Appendix E).

A model's label [MASK] state is decoded to vocabulary logits by `decode_mask_logits`, through the decoder named by
the model's `token_decoder` and reported as `decoder` in the results:
- `mlm_head`: the backbone's MLM head (transform dense + activation + LayerNorm, the tied input embeddings, the output
  bias), chosen whenever the backbone checkpoint has one, e.g. a folder written by `python -m pairzoo.adapt_mlm`,
  whose task-adapted head is then the decoder;
- `input_embeddings`: logits h W_e^T through the input-embedding matrix alone, for encoders saved without an MLM head
  such as the bundled MiniLM (an untrained stand-in: the [MASK] state was never trained to be decoded this way).
The tokenizer's special tokens are excluded and the top-k tokens are compared with a keyword set per example:

    Recall@k = |top-k ∩ keywords| / |keywords|        Precision@k = |top-k ∩ keywords| / k

averaged over examples that have at least one keyword. Keywords are lower-cased words mapped to vocabulary tokens;
a word counts only when the tokenizer encodes it as one token (with a leading space for byte-level BPE), since a
multi-piece word cannot be one decoded token; the number of dropped words is reported.

Keyword sets:
- `esnli-highlights`: the official e-SNLI highlighted words (`*word*` in `Sentence{1,2}_marked_{1,2,3}` of a
  user-supplied `esnli_dev.csv`), the paper's set.
- `esnli-proxy` (default for `snli`): the shared data has no highlights, only the three free-text explanations, so
  the keywords are the content words (not in `STOPWORDS`, at least 2 letters) that occur both in an explanation and in
  the premise or hypothesis. This is a PROXY for the highlights, not the paper's set.
- `pair` (SICK-E, RTE, anything without explanations): the content words of the input pair itself. Also a proxy.
"""

import csv
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from ..console import ConsoleArguments, OneLineErrorParser, run_command
from ..modeling.modeling_neighbor_attention import encode_neighbor_attention_inputs, resolve_label_words
from .data import load_dataset

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between both
    but by can could did do does doing down during each few for from further had has have having he her here hers
    herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on once
    only or other our ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves s t don isn aren wasn weren doesn didn
    one two three someone something person people man woman men women sentence first second statement also may
    there're it's can't cannot""".split()
)
_WORD = re.compile(r"[a-z][a-z'-]*[a-z]|[a-z]")
_MARKED = re.compile(r"\*([^*\s]+)\*")


def content_words(text: str) -> set[str]:
    """Lower-cased words of `text` with at least 2 letters that are not in `STOPWORDS`."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 2 and w not in STOPWORDS}


def pair_keywords(row: dict) -> set[str]:
    """Proxy keywords of a pair without explanations: the content words of both sentences."""
    return content_words(row["sentence1"]) | content_words(row.get("sentence2") or "")


def esnli_proxy_keywords(row: dict) -> set[str]:
    """e-SNLI proxy keywords: content words shared by any of the three explanations and the input pair."""
    explained = set().union(*(content_words(row.get(f"explanation_{k}") or "") for k in (1, 2, 3)))
    return explained & pair_keywords(row)


def read_esnli_highlights(path: "str | Path") -> list[dict]:
    """Rows (sentence1, sentence2, label, keywords) of the official `esnli_dev.csv` with its highlighted words."""
    labels = {"entailment": 0, "neutral": 1, "contradiction": 2}
    rows = []
    with open(path, newline="", encoding="utf-8") as handle:
        for record in csv.DictReader(handle):
            marked = " ".join(record.get(f"Sentence{s}_marked_{a}", "") or "" for s in (1, 2) for a in (1, 2, 3))
            words = {w.lower().strip(".,;:!?\"'") for w in _MARKED.findall(marked)} - STOPWORDS
            rows.append(
                {
                    "sentence1": record["Sentence1"],
                    "sentence2": record["Sentence2"],
                    "label": labels.get(record.get("gold_label", ""), -1),
                    "keywords": {w for w in words if w},
                }
            )
    return rows


def keyword_token_ids(tokenizer, words: set[str]) -> "tuple[set[int], int]":
    """Vocabulary ids of the words that are single tokens (a leading-space form first, for byte-level BPE), and how
    many words were dropped because the tokenizer splits them."""
    ids, dropped = set(), 0
    for word in sorted(words):
        for form in (" " + word, word):
            pieces = tokenizer(form, add_special_tokens=False)["input_ids"]
            if len(pieces) == 1:
                ids.add(pieces[0])
                break
        else:
            dropped += 1
    return ids, dropped


@torch.no_grad()
def evaluate_expressiveness(
    model,
    tokenizer,
    rows: list[dict],
    keywords: str = "pair",
    k: int = 20,
    batch_size: int = 32,
    max_length: int = 96,
) -> dict:
    """Accuracy (rows with a label >= 0), Recall@k and Precision@k of the decoded [MASK] states of `rows`, computed
    on the device the model is on. Deterministic: the model runs in eval mode, so it draws no random numbers; every
    module's previous training mode is restored on return (also when this raises).

    `keywords`: `pair`, `esnli-proxy`, or `given` (each row carries its own `keywords` set, e.g. the highlights).
    """
    keyword_fn = {"pair": pair_keywords, "esnli-proxy": esnli_proxy_keywords, "given": lambda r: r["keywords"]}
    if keywords not in keyword_fn:
        raise ValueError(f"`keywords` must be one of {sorted(keyword_fn)}, got {keywords!r}.")
    training = {module: module.training for module in model.modules()}
    model.eval()
    try:
        config = model.config
        words = resolve_label_words(config)
        device = next(model.parameters()).device
        special = torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=torch.long, device=device)
        correct = labelled = scored = dropped = 0
        recall = precision = 0.0
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            batch = encode_neighbor_attention_inputs(
                tokenizer,
                [r["sentence1"] for r in chunk],
                [r["sentence2"] for r in chunk] if chunk[0].get("sentence2") is not None else None,
                label_words=words,
                max_length=max_length,
                connecting_tokens=config.connecting_tokens,
                prompt_format=config.prompt_format,
            )
            out = model(**{key: value.to(device) for key, value in batch.items()}, output_internals=True)
            logits = model.decode_mask_logits(out.mask_hidden_state)
            logits[:, special] = float("-inf")
            top = logits.topk(k, dim=-1).indices.tolist()
            predictions = out.logits.argmax(-1).tolist()
            for row, tokens, predicted in zip(chunk, top, predictions):
                label = row.get("label", -1)
                if label is not None and label >= 0:
                    labelled += 1
                    correct += int(predicted == label)
                targets, lost = keyword_token_ids(tokenizer, keyword_fn[keywords](row))
                dropped += lost
                if targets:
                    hits = len(targets & set(tokens))
                    recall += hits / len(targets)
                    precision += hits / k
                    scored += 1
        return {
            "accuracy": 100.0 * correct / labelled if labelled else None,
            f"recall@{k}": 100.0 * recall / scored if scored else None,
            f"precision@{k}": 100.0 * precision / scored if scored else None,
            "examples": len(rows),
            "examples_with_keywords": scored,
            "keywords_dropped_multi_token": dropped,
            "keywords": keywords,
            "decoder": "input_embeddings" if model.lm_head is None else "mlm_head",
        }
    finally:  # per module: a model may keep some modules in eval mode while it trains
        for module, mode in training.items():
            module.training = mode


PROG = "pairzoo.training.expressiveness"


@dataclass
class ExpressivenessArguments:
    """The model, the rows and keywords it is scored on, and k."""

    model_dir: str = field(metadata={"help": "A saved or exported neighbor-attention model folder."})
    dataset: str = field(default="snli", metadata={"help": "pairzoo data set name (snli = e-SNLI dev)."})
    split: str = field(default="validation", metadata={"help": "Split of --dataset."})
    esnli_csv: str | None = field(
        default=None, metadata={"help": "Official esnli_dev.csv: use its highlights as keywords."}
    )
    keywords: str | None = field(
        default=None, metadata={"help": "pair or esnli-proxy (None: esnli-proxy for snli, else pair)."}
    )
    k: int = field(default=20, metadata={"help": "Decoded tokens compared with the keywords."})
    max_samples: int | None = field(default=None, metadata={"help": "First N rows of the split."})
    max_length: int = field(default=96, metadata={"help": "Maximum tokens per example."})
    batch_size: int = field(default=32, metadata={"help": "Examples per forward pass."})
    output: str | None = field(default=None, metadata={"help": "Write the metrics JSON here too."})


def main(argv: "list[str] | None" = None) -> dict:
    """`python -m pairzoo.training.expressiveness --model_dir DIR --dataset sick-e [--k 20] [--max_samples N]`:
    prints the metrics as JSON on stdout."""
    parser = OneLineErrorParser(
        (ExpressivenessArguments, ConsoleArguments), prog=f"python -m {PROG}", description=__doc__.split("\n")[0]
    )
    args, _ = parser.parse_args_into_dataclasses(args=sys.argv[1:] if argv is None else argv)
    import pairzoo  # noqa: F401  (registers the model classes with the Auto classes)

    model = AutoModelForSequenceClassification.from_pretrained(args.model_dir)
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    if args.esnli_csv:
        rows, keywords, source = read_esnli_highlights(args.esnli_csv), "given", args.esnli_csv
    else:
        rows = [dict(r) for r in load_dataset(args.dataset)[args.split]]
        keywords = args.keywords or ("esnli-proxy" if args.dataset == "snli" else "pair")
        source = f"{args.dataset}/{args.split}"
    if args.max_samples is not None:
        rows = rows[: args.max_samples]
    result = {
        "model_dir": args.model_dir,
        "data": source,
        **evaluate_expressiveness(model, tokenizer, rows, keywords, args.k, args.batch_size, args.max_length),
    }
    print(json.dumps(result, indent=2))
    if args.output:
        Path(args.output).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    sys.exit(run_command(PROG, main))
