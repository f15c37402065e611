"""The parallel ``alphazero arena``: chunks of game pairs as Ray tasks (an ``alphazero.judge.match.ChunkRunner``)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import ray

from alphazero.judge.arena import Adjudication, GameResult, Opening
from alphazero.judge.match import play_chunk
from workers.cluster import start_ray


def play_chunks_on_ray(spec_a: str, spec_b: str, chunks: Sequence[tuple[int, Sequence[Opening]]], max_plies: int,
                       seed: int, on_games: Callable[[list[GameResult]], bool], event: str = "arena",
                       adjudication: Adjudication | None = None, workers: int = 2) -> bool:
    """Play each ``(first_pair, openings)`` chunk as a Ray task on a private local Ray of ``workers`` CPUs.

    Each task builds its players from the spec strings (``alphazero.judge.match.play_chunk``); results
    are handed to ``on_games`` in completion order (``ray.wait``); when it returns True the remaining
    tasks are cancelled. Returns whether ``on_games`` stopped the match. A Ray already running in this
    process is used as it is.
    """
    started = start_ray(None, workers, object_store_memory_mb=128, log_to_driver=False)
    try:
        task: Any = ray.remote(num_cpus=1, max_retries=1)(play_chunk)  # Ray's stubs type .remote for up to 6 arguments
        pending = [task.remote(spec_a, spec_b, list(openings), first_pair, max_plies, seed, number, event, adjudication)
                   for number, (first_pair, openings) in enumerate(chunks)]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            if on_games(ray.get(ready[0])):
                for ref in pending:
                    ray.cancel(ref, force=True)
                return True
        return False
    finally:
        if started:
            ray.shutdown()
