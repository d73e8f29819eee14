"""The clock of every speed benchmark: wall-clock and process-CPU seconds of one call (CUDA synchronised before and
after when a GPU is present), repeats interleaved across the compared models so that load from other processes hits
them alike, and medians."""

import statistics
import time
from collections.abc import Callable

import torch


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def clock(fn: Callable[[], object]) -> "tuple[float, float]":
    """Wall-clock and process-CPU seconds of one call of `fn`."""
    _sync()
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    _sync()
    return time.perf_counter() - wall, time.process_time() - cpu


def interleaved(calls: "dict[str, Callable[[], object]]", warmup: int, repeats: int) -> "dict[str, list]":
    """`warmup` untimed rounds, then `repeats` rounds that call each entry of `calls` once in turn; the
    `(wall, cpu)` seconds of every timed call, per name."""
    for _ in range(warmup):
        for fn in calls.values():
            fn()
    times: dict[str, list] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, fn in calls.items():
            times[name].append(clock(fn))
    return times


def medians(times: "dict[str, list]") -> "tuple[dict[str, float], dict[str, float]]":
    """Median wall and median CPU seconds per name of `interleaved`'s result."""
    wall = {name: statistics.median(t[0] for t in values) for name, values in times.items()}
    cpu = {name: statistics.median(t[1] for t in values) for name, values in times.items()}
    return wall, cpu
