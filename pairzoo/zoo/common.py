"""What a method module of the zoo fills in besides its `ModelSpec`: the quality benchmark's arms and comparisons
(`benchmarks/quality.py` runs them) and the entries `make zoo` trains (`pairzoo.make_zoo`)."""

from dataclasses import dataclass, field

# The quality benchmark's profiles (`benchmarks/quality.py`'s `PROFILES`) an arm or comparison can be limited to: the
# peer profiles (the peer's budget and the GPU grid) and the earlier ones, whose committed run files name exactly the
# arms that had no `profiles` restriction then.
PEER_PROFILES = ("cpu-full", "gpu")
EARLIER_PROFILES = ("cpu-small", "cpu-medium", "full")


@dataclass(frozen=True)
class Arm:
    """One model configuration of a comparison: `label` names it in tables; `train_args` only where the method's
    paper trains it differently (e.g. a larger learning rate for parameter-efficient training); `profiles`: the
    profiles that run it (None: all); `adapted`: it trains on the run's backbone after the task-adaptive MLM step
    (`adapted_backbone`)."""

    label: str
    model: str
    overrides: dict = field(default_factory=dict)
    train_args: dict = field(default_factory=dict)
    profiles: "tuple | None" = None
    adapted: bool = False

    @property
    def file_label(self) -> str:
        """`label` as run file names write it: each character that is not a letter or digit a hyphen."""
        return "".join(ch if ch.isalnum() else "-" for ch in self.label)


@dataclass(frozen=True)
class Comparison:
    """A method's arms against its baseline (the first arm a profile runs) on `datasets`, with the same training
    arguments. `expressiveness`: after training, also measure Recall@20 / Precision@20 of the decoded [MASK] state
    (`pairzoo.training.expressiveness`) on the run's dev split and, for SICK-E runs, on e-SNLI dev. `profiles`: the
    profiles that run it (None: all)."""

    name: str
    arms: tuple
    datasets: tuple
    train_args: dict = field(default_factory=dict)
    expressiveness: bool = False
    profiles: "tuple | None" = None

    def __post_init__(self) -> None:
        seen: dict = {}
        for arm in self.arms:
            if arm.file_label in seen:
                raise ValueError(
                    f"comparison {self.name!r}: arms {seen[arm.file_label]!r} and {arm.label!r} would share run files "
                    f"({arm.file_label!r}); name them apart by a letter or digit."
                )
            seen[arm.file_label] = arm.label

    @property
    def baseline(self) -> Arm:
        return self.arms[0]


@dataclass(frozen=True)
class SpeedTarget:
    """A speed or memory target of a method, checked by `benchmarks/speed.py`: `text` states it; `measure` is the
    ratio it reads, "time" or "memory" (each arm of `comparison` against its baseline at batch 32, length 128) or a
    path of keys into the method's own speed result (`benchmarks/speed_<method>.py`), where "*" checks every key at
    its level, each named `(<each> <key>)`; met when the ratio is at most `limit`, or at least it with `at_least`."""

    text: str
    measure: "str | tuple[str, ...]"
    limit: float
    comparison: str = ""
    at_least: bool = False
    each: str = ""


@dataclass(frozen=True)
class ZooEntry:
    """One model of the zoo: a method's recommended configuration on its home task."""

    name: str  # the entry's folder under the output dir
    model: str  # pairzoo registry name
    dataset: str
    overrides: dict = field(default_factory=dict)  # config overrides (`--config_overrides`)
    train_args: dict = field(default_factory=dict)  # on top of the profile's recipe
    why: str = ""  # why this configuration and data set
