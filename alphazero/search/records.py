"""What a self-play game leaves behind for learning: ``GameRecord``.

Made by ``alphazero.search.selfplay`` (the floor that plays the games) and read by the learner's shard
format (``alphazero.learn.replay``). Plain arrays and strings, nothing else: no torch, no files.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class GameRecord:
    """One finished game's training data (positions in play order)."""

    planes: np.ndarray  # uint8 [T, 122], packed, side-to-move frame
    policy_offsets: np.ndarray  # int64 [T + 1]: position t's targets are [offsets[t], offsets[t+1])
    policy_actions: np.ndarray  # uint16 [sum K]: actions with visits
    policy_counts: np.ndarray  # uint16 [sum K]: their visit counts (pi = counts / sum)
    z: np.ndarray  # int8 [T]: final result for the side to move at each position
    root_values: np.ndarray  # float16 [T]: search value for the side to move, for diagnostics
    result: str  # "1-0", "0-1", "1/2-1/2"
    termination: str  # checkmate, stalemate, ..., max length
    network_version: int
    pgn: str
    plies: int  # plies in the whole game (including unrecorded opening plies)
    extra: dict = field(default_factory=dict)
    # int16 [T]: plies from each position to the game's end (the moves-left head's target); -1 where unknown
    # (a game stopped at the length limit has no end). None: unknown for every position.
    moves_left: np.ndarray | None = None

    @property
    def num_positions(self) -> int:
        return int(self.planes.shape[0])
