"""Synthetic conditional-similarity data (C-STS schema), deterministic by seed: the embedded default data set.

Each example describes two scenes with one sentence template and asks about one attribute (the number of people, the
colour of their clothes, their activity or the place). The two scenes differ in one or two attributes. The label (1-5)
says how similar the sentences are *under that condition*: the same pair is labelled 5 under a condition on which the
scenes agree and 1-3 under one on which they differ (3 for related values such as red/orange, 2 for counts one apart),
and every pair appears under one agreeing and one differing condition. A model that ignores the condition therefore
cannot score well.
"""

import random

from datasets import Dataset, DatasetDict, Features, Value

COUNTS = ["one", "two", "three", "four", "five"]
NOUNS = {"man": "men", "woman": "women", "child": "children", "person": "people", "student": "students"}
COLOURS = ["red", "blue", "green", "yellow", "black", "white", "orange", "purple"]
ITEMS = {"shirt": "shirts", "jacket": "jackets", "dress": "dresses", "hat": "hats", "coat": "coats"}
ACTIVITIES = ["walking", "running", "sitting", "eating", "reading", "dancing", "talking", "cycling"]
LOCATIONS = ["in a park", "on a beach", "in a kitchen", "on a busy street", "in a library", "at a market"]

# Related values get a middle score (3) instead of the lowest (1).
RELATED = {
    "colour": [{"red", "orange"}, {"blue", "purple"}, {"black", "white"}, {"green", "yellow"}],
    "activity": [{"walking", "running"}, {"sitting", "reading"}, {"eating", "talking"}, {"dancing", "cycling"}],
    "location": [{"in a park", "at a market"}, {"in a kitchen", "in a library"}, {"on a beach", "on a busy street"}],
}
CONDITIONS = {
    "count": ["The number of people.", "How many people there are.", "The count of people in the scene."],
    "colour": ["The colour of the clothing.", "The colour of what they wear.", "The clothing colour."],
    "activity": ["The activity.", "What the people are doing.", "The action being performed."],
    "location": ["The location.", "Where the scene takes place.", "The place."],
}
ATTRIBUTES = tuple(CONDITIONS)
FEATURES = Features(
    {
        "sentence1": Value("string"),
        "sentence2": Value("string"),
        "condition": Value("string"),
        "label": Value("float32"),
    }
)


def _sample_scene(rng: random.Random) -> dict:
    return {
        "count": rng.randrange(len(COUNTS)),
        "noun": rng.choice(list(NOUNS)),
        "colour": rng.choice(COLOURS),
        "item": rng.choice(list(ITEMS)),
        "activity": rng.choice(ACTIVITIES),
        "location": rng.choice(LOCATIONS),
    }


TEMPLATES = [
    "{S} in {C} {be} {A} {L}.",
    "{L_}, {S} wearing {C} {be} {A}.",
]


def _describe(scene: dict, template: str) -> str:
    """One sentence for a scene from `template` (both sentences of a pair share one, so their words line up)."""
    n = scene["count"] + 1
    noun = scene["noun"] if n == 1 else NOUNS[scene["noun"]]
    subject = ("a" if n == 1 else COUNTS[scene["count"]]) + " " + noun
    be = "is" if n == 1 else "are"
    item = scene["item"] if n == 1 else ITEMS[scene["item"]]
    clothes = f"{'a ' if n == 1 else ''}{scene['colour']} {item}"
    sentence = template.format(
        S=subject, C=clothes, be=be, A=scene["activity"], L=scene["location"], L_=scene["location"]
    )
    return sentence[0].upper() + sentence[1:]


def _similarity(attribute: str, a: dict, b: dict) -> float:
    """Label (1-5) of two scenes under a condition on `attribute`."""
    if attribute == "count":
        return {0: 5.0, 1: 2.0}.get(abs(a["count"] - b["count"]), 1.0)
    if a[attribute] == b[attribute]:
        return 5.0
    related = any({a[attribute], b[attribute]} <= group for group in RELATED[attribute])
    return 3.0 if related else 1.0


def _perturb(scene: dict, rng: random.Random) -> dict:
    """A second scene that differs from `scene` in some attributes and agrees on at least one."""
    other = dict(scene)
    changed = rng.sample(ATTRIBUTES, rng.choice((1, 2)))
    for attr in changed:
        pool = {"count": range(len(COUNTS)), "colour": COLOURS, "activity": ACTIVITIES}.get(attr)
        pool = pool or LOCATIONS
        other[attr] = rng.choice([v for v in pool if v != scene[attr]])
    if rng.random() < 0.5:
        other["noun"] = rng.choice(list(NOUNS))
        other["item"] = rng.choice(list(ITEMS))
    return other


def generate_examples(n: int, seed: int = 0) -> list[dict]:
    """`n` examples; pairs come in groups of two conditions (one agreeing, one differing)."""
    if n < 1:
        raise ValueError(f"`n` must be >= 1, got {n}.")
    rng = random.Random(seed)
    examples: list[dict] = []
    while len(examples) < n:
        a = _sample_scene(rng)
        b = _perturb(a, rng)
        template = rng.choice(TEMPLATES)
        s1, s2 = _describe(a, template), _describe(b, template)
        agree = [attr for attr in ATTRIBUTES if a[attr] == b[attr]]
        differ = [attr for attr in ATTRIBUTES if a[attr] != b[attr]]
        for attr in (rng.choice(agree), rng.choice(differ)):
            examples.append(
                {
                    "sentence1": s1,
                    "sentence2": s2,
                    "condition": rng.choice(CONDITIONS[attr]),
                    "label": _similarity(attr, a, b),
                }
            )
    return examples[:n]


def make_synthetic_dataset(
    n_train: int = 2000, n_validation: int = 400, n_test: int = 400, seed: int = 0
) -> DatasetDict:
    """The synthetic C-STS-schema DatasetDict (`train`, `validation`, `test`); each split has its own seed."""
    splits = {"train": n_train, "validation": n_validation, "test": n_test}
    return DatasetDict(
        {
            split: Dataset.from_list(generate_examples(size, seed=seed * 1000 + offset), features=FEATURES)
            for offset, (split, size) in enumerate(splits.items())
            if size > 0
        }
    )


def synthetic_corpus(n: int = 600, seed: int = 0) -> list[str]:
    """Plain sentences and conditions of the generator (used to train the tiny test tokenizer)."""
    texts = []
    for example in generate_examples(n, seed=seed):
        texts += [example["sentence1"], example["sentence2"], example["condition"]]
    return texts
