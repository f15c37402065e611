"""Synthetic self-play output of realistic shape and size, and the learner's sampling rate from a large window.

The pure half of the scale simulation (issue 24; the Ray half is ``workers.scale``): ``SyntheticGames`` makes
``GameRecord``s and in-flight snapshots (``SelfPlayer.snapshot``'s layout) from random legal games, so the
driver, the shard writer and the learner handle exactly what real self-play hands them, without a search:

- per position the packed planes of a real position (``uint8 [122]``, compressible as real ones are), the
  visit counts of ``min(legal moves, num_simulations // 2)`` legal actions summing to ``num_simulations``
  (``uint16``), ``z`` (``int8``, the result for the side to move) and a root value (``float16``);
- per game its result, termination, PGN (SAN moves) and network version;
- in-flight games that ``SelfPlayer.restore`` accepts (legal moves from the start position, every ply recorded).

``synthetic_shard`` is one shard of them as the driver writes it (the learner benchmark's window too);
``sampling_rate`` measures ``ReplayWindow.sample`` (the learner's input) from a window of a given size.
Knows nothing of Ray, actors or clocks beyond the measurement's own timer.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import chess
import numpy as np

from alphazero.board import encoding
from alphazero.learn.replay import ReplayWindow, Shard, read_shard, write_shard
from alphazero.search.records import GameRecord

_RESULTS = ("1-0", "0-1", "1/2-1/2")


class _Template:
    """One random legal game of ``length`` recorded positions: its arrays and its moves."""

    def __init__(self, rng: np.random.Generator, length: int, num_simulations: int) -> None:
        board = chess.Board()
        features: list[list[int]] = []
        lengths: list[int] = []
        actions: list[np.ndarray] = []
        counts: list[np.ndarray] = []
        moves: list[str] = []
        san: list[str] = []
        while len(features) < length:
            legal = list(board.legal_moves)
            if not legal:  # the random game ended early: go on from a fresh start (positions stay real)
                board = chess.Board()
                continue
            features.append(encoding.board_features(board))
            visited = min(len(legal), max(1, num_simulations // 2))
            chosen = rng.choice(len(legal), size=visited, replace=False)
            share = rng.multinomial(max(0, num_simulations - visited), rng.dirichlet(np.ones(visited)))
            actions.append(encoding.moves_to_actions(board, [legal[i] for i in chosen]).astype(np.uint16))
            counts.append((1 + share).astype(np.uint16))
            lengths.append(visited)
            move = legal[int(rng.integers(len(legal)))]
            san.append(board.san(move))
            moves.append(move.uci())
            board.push(move)
        self.planes = encoding.packed_from_features(features)  # uint8 [L, 122]
        self.lengths = lengths
        self.offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)  # [L + 1]
        self.actions = np.concatenate(actions)
        self.counts = np.concatenate(counts)
        self.root_values = rng.uniform(-1, 1, size=length).astype(np.float16)
        self.moves = moves
        self.pgn = " ".join(f"{i // 2 + 1}. {m}" if i % 2 == 0 else m for i, m in enumerate(san))
        self.result = _RESULTS[int(rng.integers(3))]

    def record(self, network_version: int) -> GameRecord:
        # z for the side to move: White moves at even plies of a template that starts from the start position.
        sign = {"1-0": 1, "0-1": -1, "1/2-1/2": 0}[self.result]
        z = (sign * np.where(np.arange(len(self.planes)) % 2 == 0, 1, -1)).astype(np.int8)
        termination = "checkmate" if sign else "threefold repetition"
        return GameRecord(planes=self.planes, policy_offsets=self.offsets, policy_actions=self.actions,
                          policy_counts=self.counts, z=z, root_values=self.root_values, result=self.result,
                          termination=termination, network_version=network_version, pgn=self.pgn,
                          plies=len(self.planes))

    def inflight(self, plies: int, network_version: int) -> dict[str, Any]:
        """The first ``plies`` plies of this game as a game in flight (``SelfPlayer.snapshot``'s layout)."""
        end = int(self.offsets[plies])
        return {"start_fen": chess.STARTING_FEN, "moves": self.moves[:plies], "opening_plies": 0,
                "recorded_plies": list(range(plies)), "target_lengths": self.lengths[:plies],
                "target_actions": self.actions[:end], "target_counts": self.counts[:end],
                "root_values": [float(v) for v in self.root_values[:plies]], "network_version": network_version,
                "may_resign": True, "low_moves": [0, 0], "would_resign": None}


class SyntheticGames:
    """Finished games of ``game_positions`` positions and in-flight snapshots, from a few random templates.

    ``num_simulations`` sizes the policy targets as a search of that many simulations would.
    """

    def __init__(self, game_positions: int, num_simulations: int, seed: int = 0, num_templates: int = 4) -> None:
        rng = np.random.default_rng(seed)
        self.game_positions = game_positions
        self.templates = [_Template(rng, game_positions, num_simulations) for _ in range(num_templates)]

    def finished(self, count: int, network_version: int, first: int = 0) -> list[GameRecord]:
        """``count`` finished games (game ``first + i`` is template ``(first + i) % num_templates``)."""
        return [self.templates[(first + i) % len(self.templates)].record(network_version) for i in range(count)]

    def inflight(self, num_games: int, progress: float, network_version: int) -> list[dict[str, Any]]:
        """``num_games`` games in flight, evenly staggered: game ``j`` is ``(progress + j / num_games)``
        of the way through its game (fractions taken modulo 1)."""
        out = []
        for j in range(num_games):
            plies = int(((progress + j / num_games) % 1.0) * self.game_positions)
            out.append(self.templates[j % len(self.templates)].inflight(plies, network_version))
        return out


def synthetic_shard(game_positions: int, num_simulations: int, num_games: int = 8, seed: int = 0) -> tuple[Shard, int]:
    """One shard of ``num_games`` synthetic games, written and read back through the shard format (as the driver
    writes one play call's games), and its size on disk in bytes."""
    games = SyntheticGames(game_positions, num_simulations, seed).finished(num_games, 0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "shard-00000000.npz"
        write_shard(path, games)
        return read_shard(path), path.stat().st_size


def sampling_rate(window_positions: int, batch_size: int = 256, seconds: float = 10.0, game_positions: int = 150,
                  games_per_shard: int = 8, num_simulations: int = 32, seed: int = 0) -> dict[str, Any]:
    """Batches/s and positions/s of ``ReplayWindow.sample`` from a full window of ``window_positions``.

    The window is filled with copies of one shard of synthetic games, written and read back through the
    shard format (``games_per_shard`` games per shard, as the driver writes one play call's games); each
    copy owns its arrays, so the window's memory is what a real one of that size holds. This is slow to
    build for large windows (seconds per million positions).
    """
    shard, shard_bytes = synthetic_shard(game_positions, num_simulations, games_per_shard, seed)
    window = ReplayWindow(window_positions)
    build = time.perf_counter()
    copies = 0
    while window.num_positions < window_positions:
        window.add(replace(shard, path=Path(f"shard-{copies:08d}.npz"), planes=shard.planes.copy(),
                           policy_offsets=shard.policy_offsets.copy(), policy_actions=shard.policy_actions.copy(),
                           policy_counts=shard.policy_counts.copy(), z=shard.z.copy(),
                           root_values=shard.root_values.copy()))
        copies += 1
    build = time.perf_counter() - build
    rng = np.random.default_rng(seed)
    window.sample(batch_size, rng)  # warm
    batches, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        window.sample(batch_size, rng)
        batches += 1
    elapsed = time.perf_counter() - start
    return {"window_positions": window.num_positions, "shards": len(window.shards), "batch_size": batch_size,
            "shard_bytes_per_position": round(shard_bytes / shard.num_positions, 1),
            "build_s": round(build, 1), "batches_per_s": round(batches / elapsed, 1),
            "positions_per_s": round(batches * batch_size / elapsed)}
