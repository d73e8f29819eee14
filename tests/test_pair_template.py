"""Cross and bi inputs follow each tokenizer's own pair template: BERT's `[CLS] A [SEP] B [SEP]` (MiniLM's ids as
they always were), RoBERTa's `<s> A </s></s> B </s>`; truncation rules and span masks keep working."""

import copy

import pytest
import torch
from datasets import Dataset
from tokenizers.processors import TemplateProcessing

from pairzoo import create_model, encode_conditional_inputs, load_tokenizer
from pairzoo.modeling.common import conditional_span_masks
from pairzoo.pipelines.pipeline_conditional_similarity import encode_bi_inputs
from pairzoo.training.collators import ConditionalPairCollator, check_training_data

S1 = ["A man is walking his dog.", "Two women are running in a park!", "Nobody."]
S2 = ["A man runs fast.", "A child sleeps.", "Three dogs play with a red ball."]
CONDITIONS = ["The speed.", "The number of people, roughly.", "Animals."]


def _ids(tokenizer, text: str) -> "list[int]":
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _rows(encoded: dict, key: str = "input_ids") -> "list[list[int]]":
    mask = encoded[key.replace("input_ids", "attention_mask")]
    return [row[: int(length)] for row, length in zip(encoded[key].tolist(), mask.sum(1))]


def _pairs(tokenizer, first: "list[str]", second: "list[str]") -> "list[list[int]]":
    return [tokenizer(a, b)["input_ids"] for a, b in zip(first, second)]


@pytest.mark.parametrize("backbone", ["minilm", "tiny-bert"])
def test_bert_inputs_are_the_tokenizers_pair_encoding_as_before(backbone):
    """MiniLM's WordPiece ids are unchanged: one text is `tokenizer(s1)`, two `tokenizer(s1, s2)` (or `(s1, c)`),
    three `tokenizer(s1, s2)` then `c [SEP]`; no token types, as before (the model's default 0 throughout)."""
    tokenizer = load_tokenizer(backbone)
    sep = tokenizer.sep_token_id
    assert _rows(encode_conditional_inputs(tokenizer, S1)) == [tokenizer(s)["input_ids"] for s in S1]
    assert _rows(encode_conditional_inputs(tokenizer, S1, S2)) == _pairs(tokenizer, S1, S2)
    assert _rows(encode_conditional_inputs(tokenizer, S1, None, CONDITIONS)) == _pairs(tokenizer, S1, CONDITIONS)
    expected = [pair + _ids(tokenizer, c) + [sep] for pair, c in zip(_pairs(tokenizer, S1, S2), CONDITIONS)]
    cross = encode_conditional_inputs(tokenizer, S1, S2, CONDITIONS)
    assert _rows(cross) == expected
    assert set(cross) == {"input_ids", "attention_mask"}
    bi = encode_bi_inputs(tokenizer, S1, S2, CONDITIONS)
    assert _rows(bi) == _pairs(tokenizer, S1, CONDITIONS)
    assert _rows(bi, "input_ids_2") == _pairs(tokenizer, S2, CONDITIONS)
    assert not any(key.startswith("token_type_ids") for key in bi)


def test_roberta_cross_inputs_chain_its_pair_template():
    """`<s> s1 </s></s> s2 </s></s> c </s>`; one and two texts are exactly the tokenizer's own encodings."""
    tokenizer = load_tokenizer("tiny-roberta")
    bos, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    cross = encode_conditional_inputs(tokenizer, S1, S2, CONDITIONS)
    expected = [
        [bos] + _ids(tokenizer, a) + [sep, sep] + _ids(tokenizer, b) + [sep, sep] + _ids(tokenizer, c) + [sep]
        for a, b, c in zip(S1, S2, CONDITIONS)
    ]
    assert _rows(cross) == expected
    tokens = tokenizer.convert_ids_to_tokens(_rows(cross)[0])
    assert tokens[0] == "<s>" and tokens[-1] == "</s>" and tokens.count("</s>") == 5
    assert set(cross) == {"input_ids", "attention_mask"}
    assert _rows(encode_conditional_inputs(tokenizer, S1, S2)) == _pairs(tokenizer, S1, S2)
    assert _rows(encode_conditional_inputs(tokenizer, S1, None, CONDITIONS)) == _pairs(tokenizer, S1, CONDITIONS)
    assert _rows(encode_conditional_inputs(tokenizer, S1)) == [tokenizer(s)["input_ids"] for s in S1]


def test_roberta_bi_inputs_are_its_pair_encoding_of_sentence_and_condition():
    """`<s> s </s></s> c </s>` per sentence, the ids of `tokenizer(s, c)`; the span masks split after `</s></s>`."""
    tokenizer = load_tokenizer("tiny-roberta")
    bi = encode_bi_inputs(tokenizer, S1, S2, CONDITIONS)
    assert _rows(bi) == _pairs(tokenizer, S1, CONDITIONS)
    assert _rows(bi, "input_ids_2") == _pairs(tokenizer, S2, CONDITIONS)
    assert not any(key.startswith("token_type_ids") for key in bi)
    for suffix, sentences in (("", S1), ("_2", S2)):
        for row, (sentence, condition) in enumerate(zip(sentences, CONDITIONS)):
            ids = bi["input_ids" + suffix][row]
            expected_sentence = [tokenizer.cls_token_id] + _ids(tokenizer, sentence) + [tokenizer.sep_token_id] * 2
            assert ids[bi["sentence_mask" + suffix][row].bool()].tolist() == expected_sentence
            assert ids[bi["condition_mask" + suffix][row].bool()].tolist() == _ids(tokenizer, condition) + [
                tokenizer.sep_token_id
            ]


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-roberta"])
@pytest.mark.parametrize("with_sentence2", [True, False])
def test_span_masks_match_the_masks_derived_from_separators(backbone, with_sentence2):
    """The condition part is the condition's tokens and its closing separator, whatever the separators between
    texts (`</s></s>` included), and `conditional_span_masks` reads the same split from the ids alone."""
    tokenizer = load_tokenizer(backbone)
    encoded = encode_conditional_inputs(
        tokenizer, S1, S2 if with_sentence2 else None, CONDITIONS, return_span_masks=True
    )
    sentence, condition = conditional_span_masks(encoded["input_ids"], encoded["attention_mask"])
    assert torch.equal(sentence, encoded["sentence_mask"])
    assert torch.equal(condition, encoded["condition_mask"])
    for row, text in enumerate(CONDITIONS):
        part = encoded["input_ids"][row][condition[row].bool()].tolist()
        assert part == _ids(tokenizer, text) + [tokenizer.sep_token_id]


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-roberta"])
def test_truncation_counts_the_templates_special_tokens(backbone):
    """Three texts take the pair template's special tokens plus one more separator run; at exactly that room plus
    one token per sentence the condition is kept whole, one token less is the condition error."""
    tokenizer = load_tokenizer(backbone)
    pair = tokenizer.num_special_tokens_to_add(pair=True)
    specials = pair + pair - tokenizer.num_special_tokens_to_add(pair=False)
    long = "word " * 100
    condition = CONDITIONS[1]
    fitting = len(_ids(tokenizer, condition)) + specials + 2
    encoded = encode_conditional_inputs(tokenizer, long, long, condition, max_length=fitting, return_span_masks=True)
    assert encoded["input_ids"].shape == (1, fitting)
    kept = encoded["input_ids"][0][encoded["condition_mask"][0].bool()].tolist()
    assert kept == _ids(tokenizer, condition) + [tokenizer.sep_token_id]
    words = encoded["input_ids"][0][~torch.isin(encoded["input_ids"][0], torch.tensor(tokenizer.all_special_ids))]
    assert words.tolist() == _ids(tokenizer, long)[:1] + _ids(tokenizer, long)[:1] + _ids(tokenizer, condition)
    with pytest.raises(ValueError, match=r"`condition`\[0\] has \d+ tokens and cannot fit in max_length="):
        encode_conditional_inputs(tokenizer, long, long, condition, max_length=fitting - 1)
    with pytest.raises(ValueError, match=rf"the special tokens take {pair} .* max_length must be >= {pair + 2}\."):
        encode_conditional_inputs(tokenizer, long, long, max_length=pair + 1)
    limit = pair + 2 * len(_ids(tokenizer, S2[0]))  # the longer sentence is cut to the shorter one's length
    truncated = encode_conditional_inputs(tokenizer, long, S2[0], max_length=limit)
    assert _rows(truncated) == [tokenizer(long, S2[0], truncation="longest_first", max_length=limit)["input_ids"]]


def test_training_data_check_agrees_with_the_roberta_layout():
    """`check_training_data` sizes a condition with the template's separators: a condition that exactly fits passes
    and encodes; one token less room is the error naming the row."""
    tokenizer = load_tokenizer("tiny-roberta")
    model = create_model("cross-encoder", backbone="tiny-roberta")
    data = Dataset.from_dict({"sentence1": [S1[0]], "sentence2": [S2[0]], "condition": [CONDITIONS[1]], "label": [3]})
    fitting = len(_ids(tokenizer, CONDITIONS[1])) + 6 + 2  # `<s> </s></s> </s></s> </s>` and a token per sentence
    collator = ConditionalPairCollator(tokenizer, fitting, 1, (1.0, 5.0))
    check_training_data(model, collator, {"train": data}, "toy")
    assert collator(list(data))["input_ids"].shape == (1, fitting)
    short = ConditionalPairCollator(tokenizer, fitting - 1, 1, (1.0, 5.0))
    with pytest.raises(ValueError, match=rf"dataset 'toy', train split, row 0: `condition` .* >= {fitting}, but"):
        check_training_data(model, short, {"train": data}, "toy")


@pytest.mark.parametrize(
    "pair",
    ["[CLS] $A $B:1 [SEP]:1", "[CLS] $A [SEP] $B:1 [CLS]:1"],
    ids=["no-separator-between-texts", "different-closing-token"],
)
def test_a_pair_template_without_a_common_separator_is_an_error(pair):
    tokenizer = copy.deepcopy(load_tokenizer("tiny-bert"))
    tokenizer.backend_tokenizer.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]", pair=pair, special_tokens=[("[CLS]", 101), ("[SEP]", 102)]
    )
    with pytest.raises(ValueError, match=r"encodes a text pair as `\[CLS\] a .*`: cross-encoder inputs need"):
        encode_conditional_inputs(tokenizer, "a man", "a dog", "the speed")
    with pytest.raises(ValueError, match="pair template ends each text with the same separator token"):
        encode_bi_inputs(tokenizer, "a man", "a dog", "the speed")
