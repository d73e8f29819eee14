"""The quality benchmark's grid as data: `benchmarks/grid.toml` (its profiles, their training recipes, the groups of
(comparison, data sets) their stages run) read into `Grid` and checked as it is read. An unknown key, a value of the
wrong type, an unknown recipe, group, comparison, data set or launcher is a ValueError naming the file and the key."""

import sys
from dataclasses import dataclass, field, fields
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # the dev extra installs tomli there
    import tomli as tomllib

GRID_FILE = Path(__file__).with_name("grid.toml")
LAUNCHERS = ("python", "accelerate")
_KINDS = {str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "an array", dict: "a table"}


@dataclass(frozen=True)
class Stage:
    """(comparison name, data sets) pairs that run together, seed-major; `first_seeds`: only on the first N of the
    profile's seeds (None: all)."""

    pairs: tuple
    first_seeds: "int | None" = None


@dataclass(frozen=True)
class Profile:
    """One profile of the grid, its `args`, `dataset_args`, `comparison_args` and `cuda_args` resolved to tables of
    `pairzoo.train` flags; `stages` None for a profile that runs every comparison, comparison by comparison."""

    backbone: str
    seeds: tuple
    args: dict
    launcher: str
    about: str = ""
    dataset_args: dict = field(default_factory=dict)
    comparison_args: dict = field(default_factory=dict)
    cuda_args: dict = field(default_factory=dict)
    max_epochs: "int | None" = None
    home_dataset_only: bool = False
    esnli_rows: "int | None" = None
    stages: "tuple[Stage, ...] | None" = None


@dataclass(frozen=True)
class Grid:
    """The whole file: training-split sizes (for `--list`), the task-adaptive MLM step's flags, the recipes, the
    groups (name -> ((comparison, data sets), ...)) and the profiles by name."""

    train_rows: dict
    adaptation: dict
    recipes: dict
    groups: dict
    profiles: dict


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


def _kind(value: object) -> str:
    return next((name for kind, name in _KINDS.items() if isinstance(value, kind)), type(value).__name__)


class _Reader:
    """Checks the parsed TOML of one file; every error names the file and the dotted key."""

    def __init__(self, path: Path, comparisons: "dict[str, tuple] | None") -> None:
        self.path, self.comparisons = path, comparisons
        self.datasets = None if comparisons is None else {d for ds in comparisons.values() for d in ds}

    def error(self, key: str, problem: str) -> ValueError:
        return ValueError(f"{self.path}: {key}: {problem}")

    def expect(self, value: object, kinds: tuple, key: str, what: str) -> object:
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            raise self.error(key, f"expected {what}, got {_kind(value)} {value!r}")
        return value

    def table(self, value: object, key: str, required: tuple = (), optional: tuple = ()) -> dict:
        """`value` as a table holding every `required` key and no key outside `required` and `optional` (when either
        is given)."""
        self.expect(value, (dict,), key, "a table")
        for name in required:
            if name not in value:
                raise self.error(_join(key, name), "missing")
        known = (*required, *optional)
        for name in value:
            if known and name not in known:
                raise self.error(_join(key, name), f"unknown key; known: {', '.join(known)}")
        return value

    def positive(self, value: object, key: str) -> int:
        if self.expect(value, (int,), key, "an integer >= 1") < 1:
            raise self.error(key, f"expected an integer >= 1, got {value!r}")
        return value

    def names(self, value: object, key: str, known: "set | None" = None, what: str = "name") -> tuple:
        """A non-empty array of strings, each in `known` (when given)."""
        self.expect(value, (list,), key, "an array of strings")
        if not value:
            raise self.error(key, "expected a non-empty array")
        for i, name in enumerate(value):
            self.expect(name, (str,), f"{key}[{i}]", "a string")
            if known is not None and name not in known:
                raise self.error(f"{key}[{i}]", f"unknown {what} {name!r}; known: {', '.join(sorted(known))}")
        return tuple(value)

    def flags(self, value: object, key: str) -> dict:
        """A table of command-line flags: each value a string, number or boolean."""
        for name, flag in self.table(value, key).items():
            self.expect(flag, (str, int, float, bool), f"{key}.{name}", "a string, number or boolean")
        return dict(value)

    def args(self, value: object, key: str, recipes: dict) -> dict:
        """A table of flags, a recipe name or an array of both, merged in order (later keys win)."""
        parts = [(f"{key}[{i}]", part) for i, part in enumerate(value)] if isinstance(value, list) else [(key, value)]
        merged = {}
        for where, part in parts:
            if isinstance(part, str):
                if part not in recipes:
                    raise self.error(where, f"unknown recipe {part!r}; known: {', '.join(recipes)}")
                merged.update(recipes[part])
            else:
                self.expect(part, (dict,), where, "a table of pairzoo.train flags or a recipe name")
                merged.update(self.flags(part, where))
        return merged

    def keyed_args(self, value: object, key: str, recipes: dict, known: "set | None", what: str) -> dict:
        """A table of `args` tables by data set or comparison name (each in `known`, when given)."""
        resolved = {}
        for name, part in self.table(value, key).items():
            if known is not None and name not in known:
                raise self.error(f"{key}.{name}", f"unknown {what} {name!r}; known: {', '.join(sorted(known))}")
            resolved[name] = self.args(part, f"{key}.{name}", recipes)
        return resolved

    def group(self, value: object, key: str) -> tuple:
        """(comparison, data sets) pairs, each comparison known and its data sets among its own."""
        pairs = []
        for name, datasets in self.table(value, key).items():
            where = f"{key}.{name}"
            if self.comparisons is not None and name not in self.comparisons:
                known = ", ".join(sorted(self.comparisons))
                raise self.error(where, f"unknown comparison {name!r}; known: {known}")
            datasets = self.names(datasets, where)
            for i, dataset in enumerate(datasets):
                own = () if self.comparisons is None else self.comparisons[name]
                if self.comparisons is not None and dataset not in own:
                    raise self.error(
                        f"{where}[{i}]", f"{name!r} has no data set {dataset!r}; its own: {', '.join(own)}"
                    )
            pairs.append((name, datasets))
        return tuple(pairs)

    def profile(self, value: object, key: str, recipes: dict, groups: dict) -> Profile:
        names = [f.name for f in fields(Profile)]
        table = self.table(value, key, ("backbone", "seeds", "args", "launcher"), tuple(names[4:]))
        resolved = {
            "backbone": self.expect(table["backbone"], (str,), f"{key}.backbone", "a string"),
            "seeds": tuple(self.expect(table["seeds"], (list,), f"{key}.seeds", "an array of integers")),
            "args": self.args(table["args"], f"{key}.args", recipes),
            "launcher": self.expect(table["launcher"], (str,), f"{key}.launcher", "a string"),
        }
        if not resolved["seeds"]:
            raise self.error(f"{key}.seeds", "expected a non-empty array")
        for i, seed in enumerate(resolved["seeds"]):
            self.expect(seed, (int,), f"{key}.seeds[{i}]", "an integer")
        if resolved["launcher"] not in LAUNCHERS:
            raise self.error(f"{key}.launcher", f"expected one of {', '.join(LAUNCHERS)}, got {table['launcher']!r}")
        for name, what in (("dataset_args", "data set"), ("comparison_args", "comparison")):
            if name in table:
                known = self.datasets if name == "dataset_args" else self.comparisons
                known = None if known is None else set(known)
                resolved[name] = self.keyed_args(table[name], f"{key}.{name}", recipes, known, what)
        if "cuda_args" in table:
            resolved["cuda_args"] = self.args(table["cuda_args"], f"{key}.cuda_args", recipes)
        for name in ("max_epochs", "esnli_rows"):
            if name in table:
                resolved[name] = self.positive(table[name], f"{key}.{name}")
        for name, kind, what in (("about", str, "a string"), ("home_dataset_only", bool, "a boolean")):
            if name in table:
                resolved[name] = self.expect(table[name], (kind,), f"{key}.{name}", what)
        if "stages" in table:
            stages = self.expect(table["stages"], (list,), f"{key}.stages", "an array of tables")
            resolved["stages"] = tuple(self.stage(s, f"{key}.stages[{i}]", groups) for i, s in enumerate(stages))
        return Profile(**resolved)

    def stage(self, value: object, key: str, groups: dict) -> Stage:
        table = self.table(value, key, ("groups",), ("first_seeds",))
        names = self.names(table["groups"], f"{key}.groups", set(groups), "group")
        first = self.positive(table["first_seeds"], f"{key}.first_seeds") if "first_seeds" in table else None
        return Stage(tuple(pair for name in names for pair in groups[name]), first)


def load_grid(path: Path = GRID_FILE, comparisons: "list | None" = None) -> Grid:
    """Read and check the grid file `path`. With `comparisons` (`pairzoo.zoo.Comparison`s), every comparison and data
    set the file names must be one of theirs, and every profile an arm or comparison is limited to must be in the
    file. Raises FileNotFoundError when the file is missing, ValueError (naming the file and key) when it is bad."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{path}: not valid TOML: {err}") from err
    known = None if comparisons is None else {c.name: c.datasets for c in comparisons}
    reader = _Reader(path, known)
    names = ("train_rows", "adaptation", "recipes", "groups", "profiles")
    reader.table(data, "", names)
    train_rows = reader.table(data["train_rows"], "train_rows")
    for name, rows in train_rows.items():
        if reader.datasets is not None and name not in reader.datasets:
            raise reader.error(f"train_rows.{name}", f"unknown data set {name!r}")
        reader.positive(rows, f"train_rows.{name}")
    adaptation = reader.flags(data["adaptation"], "adaptation")
    recipes = {n: reader.flags(r, f"recipes.{n}") for n, r in reader.table(data["recipes"], "recipes").items()}
    groups = {n: reader.group(g, f"groups.{n}") for n, g in reader.table(data["groups"], "groups").items()}
    profiles = {
        n: reader.profile(p, f"profiles.{n}", recipes, groups)
        for n, p in reader.table(data["profiles"], "profiles").items()
    }
    for comparison in comparisons or ():
        for owner in (comparison, *comparison.arms):
            missing = sorted(set(owner.profiles or ()) - set(profiles))
            if missing:
                who = comparison.name if owner is comparison else f"{comparison.name} / {owner.label}"
                raise reader.error("profiles", f"no profile {missing}, where {who!r} runs")
    return Grid(dict(train_rows), adaptation, recipes, groups, profiles)
