"""The learner's training throughput: samples per second of ``Learner.train`` with the config's network and
``train`` settings (its precision and channels-last resolved as a run resolves them), on synthetic self-play
shards, no Ray.

This is the other side of a run's balance. A run trains at most ``train.max_sample_reuse`` samples per
position generated, so self-play positions/s x ``max_sample_reuse`` above ``learner_samples_per_s`` means
the learner, not self-play, bounds the run: each position is then trained fewer times than the cap
(``samples_trained / positions`` in a run's ``metrics.jsonl``). In a run the learner shares the cores with
the actors, so its rate there is lower than this one-core figure.
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch

from alphazero.bench.scale import synthetic_shard
from alphazero.config import RunConfig
from alphazero.learn.train import Learner


def learner_samples_per_s(config: RunConfig, seconds: float, threads: int = 1, device: str = "cpu",
                          seed: int = 0) -> dict[str, object]:
    """``{"learner_samples_per_s", "learner_precision"}``: ``Learner.train``'s samples/s on ``threads`` torch
    threads on ``device`` over at least ``seconds`` (two warm-up steps first), from a window of synthetic games (random
    legal positions, policy targets the size ``search.num_simulations`` gives) as the run's shards hold them."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        learner = Learner(config.network, replace(config.train, device=device), seed=seed)
        learner.window.add(synthetic_shard(150, config.search.num_simulations, seed=seed)[0])
        learner.train(2)  # warm-up: first-call allocations, bf16 kernels
        steps, elapsed = 0, 0.0
        while elapsed < seconds or steps == 0:
            started = time.perf_counter()
            learner.train(1)
            elapsed += time.perf_counter() - started
            steps += 1
        return {"learner_samples_per_s": round(steps * learner.config.batch_size / elapsed),
                "learner_precision": learner.config.precision + ("+cl" if learner.config.channels_last else "")}
    finally:
        torch.set_num_threads(previous)
