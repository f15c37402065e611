"""The parallel ``alphazero ladder``: a round's games as Ray tasks (an ``alphazero.judge.ladder.Runner``)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import ray

from alphazero.judge.arena import Adjudication, GameResult, ScheduledGame
from alphazero.judge.ladder import play_schedule


def _play_chunk(spec_a: str, spec_b: str, schedule: Sequence[ScheduledGame], max_plies: int, seed: int,
                chunk: int, adjudication: Adjudication | None = None) -> list[GameResult]:
    """One Ray task: one torch thread (the task reserves one CPU), then ``play_schedule``."""
    import torch

    torch.set_num_threads(1)
    return play_schedule(spec_a, spec_b, schedule, max_plies, seed, chunk, adjudication=adjudication)


def play_on_ray(spec_a: str, spec_b: str, schedule: Sequence[ScheduledGame], max_plies: int, seed: int,
                on_games: Callable[[list[GameResult]], None], adjudication: Adjudication | None = None,
                workers: int = 2) -> None:
    """Split a round's ``schedule`` into ``workers`` chunks (every ``workers``-th game) and play each as a Ray
    task on the Ray this process has started (``workers.cluster.start_ray``); each chunk's games go to
    ``on_games`` as the chunk ends (``ray.wait``: completion order)."""
    chunks = [list(schedule[number::workers]) for number in range(workers) if schedule[number::workers]]
    task: Any = ray.remote(num_cpus=1, max_retries=1)(_play_chunk)  # Ray's stubs type .remote for up to 6 arguments
    pending = [task.remote(spec_a, spec_b, chunk, max_plies, seed, number, adjudication)
               for number, chunk in enumerate(chunks)]
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        on_games(ray.get(ready[0]))
