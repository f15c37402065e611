"""NNUE training throughput: the trainer's positions per second on synthetic data (no data file).

Owns ``synthetic_positions`` (random feature rows shaped like a middlegame's) and
``nnue_train_positions_per_s``, ``alphazero bench``'s ``nnue_train_positions_per_s_{1,2}t``.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from alphazero.learn.nnue_data import FeatureRows, PositionData
from alphazero.learn.nnue_train import DEFAULT_BATCH_SIZE, Trainer, TrainOptions
from alphazero.nets.nnue import NNUEConfig


def synthetic_positions(num_positions: int, num_features: int = 768, seed: int = 0) -> PositionData:
    """Random feature rows (16 to 32 distinct active features per perspective, as a middlegame has in
    ``all``) with random scores and results: for timing the trainer without a data file."""
    rng = np.random.default_rng(seed)

    def rows() -> tuple[np.ndarray, np.ndarray]:
        counts = rng.integers(16, 33, size=num_positions)
        chosen = np.argsort(rng.random((num_positions, num_features), dtype=np.float32), axis=1)[:, :32]
        keep = np.arange(32)[None, :] < counts[:, None]
        offsets = np.zeros(num_positions + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        return np.sort(np.where(keep, chosen, num_features), axis=1)[keep].astype(np.int32), offsets

    stm, nstm = rows(), rows()
    features = FeatureRows(stm[0], stm[1], nstm[0], nstm[1], np.diff(stm[1]).astype(np.uint8))
    score = rng.normal(0.0, 300.0, num_positions).astype(np.float32)
    result = rng.integers(-1, 2, num_positions).astype(np.float32)
    return PositionData(features, score, result, np.arange(num_positions, dtype=np.int64),
                        np.zeros(num_positions, dtype=bool), "synthetic")


def nnue_train_positions_per_s(threads: int = 1, batch_size: int = DEFAULT_BATCH_SIZE, steps: int = 20,
                               seed: int = 0) -> float:
    """Training throughput (positions per second) of the default net (``all`` 768 -> 128x2 -> 1, crelu,
    sigmoid-MSE, AdamW) on ``threads`` torch threads: ``steps`` timed steps after two warm-up steps, each
    a full step as the trainer takes it (batch gather from a larger set, forward, backward, update, clip)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        data = synthetic_positions(4 * batch_size, seed=seed)
        options = TrainOptions(data=("synthetic",), out="", batch_size=batch_size, seed=seed)
        trainer = Trainer(NNUEConfig(), options)
        rng = np.random.default_rng(seed)
        batches = [data.subset(np.sort(rng.permutation(data.num_positions)[:batch_size])) for _ in range(2)]
        for batch in batches:
            trainer.step(batch)
        started = time.perf_counter()
        for step in range(steps):
            trainer.step(data.subset(rng.permutation(data.num_positions)[:batch_size]))
        return steps * batch_size / (time.perf_counter() - started)
    finally:
        torch.set_num_threads(previous)

