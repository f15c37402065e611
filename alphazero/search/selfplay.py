"""Self-play: many games at once through one batched search, yielding ``GameRecord``s.

``SelfPlayer`` keeps ``games_per_worker`` games in flight. Each step searches every running game
together (one network call per simulation round for all of them), records the position and the
visit counts, plays the chosen move and starts a new game in the slot of any game that ended. The
same class runs in a plain process or inside a Ray actor (``workers.actors``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import chess
import numpy as np

from alphazero.board import encoding
from alphazero.board.game import MAX_LENGTH, RESIGNATION, game_pgn, result_string, terminal_status
from alphazero.config import SearchConfig, SelfPlayConfig
from alphazero.search.compiled.tree import CompiledGameTree
from alphazero.search.factory import build_search
from alphazero.search.mcts import Evaluator, GameTree
from alphazero.search.records import GameRecord


@dataclass
class _GameInProgress:
    tree: GameTree | CompiledGameTree
    start_fen: str
    opening_plies: int
    features: list
    actions: list
    counts: list
    root_values: list
    movers: list  # chess.Color of the side to move at each recorded position
    network_version: int
    recorded_plies: list = field(default_factory=list)  # len(move_stack) at each recorded position
    may_resign: bool = True  # False in the games played out to measure false resignations
    # per colour: own moves in a row with root value below the threshold
    low_moves: dict[chess.Color, int] = field(default_factory=lambda: {chess.WHITE: 0, chess.BLACK: 0})
    would_resign: bool | None = None  # colour that would have resigned (games played out), first time


class SelfPlayer:
    """Plays self-play games in batches; ``play(min_games)`` returns finished ``GameRecord``s."""

    def __init__(
        self,
        evaluator: Evaluator,
        search: SearchConfig,
        selfplay: SelfPlayConfig,
        seed: int = 0,
        network_version: int = 0,
        start_fen_fn: Callable[[np.random.Generator], str] | None = None,
    ) -> None:
        self.mcts, self._new_tree = build_search(evaluator, search)
        self.search_config = search
        self.config = selfplay
        self.rng = np.random.default_rng(seed)
        self.network_version = network_version
        self.start_fen_fn = start_fen_fn
        self.games: list[_GameInProgress] = [self._new_game() for _ in range(selfplay.games_per_worker)]
        self.positions_played = 0
        self.games_played = 0

    def set_network_version(self, version: int) -> None:
        """New games (and positions from now on) are tagged with ``version``."""
        self.network_version = version

    def _new_game(self) -> _GameInProgress:
        seed = int(self.rng.integers(2**63))
        board = chess.Board(self.start_fen_fn(self.rng)) if self.start_fen_fn else chess.Board()
        start_fen = board.fen()
        tree_rng = np.random.default_rng(seed)
        opening = 0
        for _ in range(self.config.random_opening_plies):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(moves[int(tree_rng.integers(len(moves)))])
            opening += 1
            if terminal_status(board) is not None:  # rare: start over from the given position
                board = chess.Board(start_fen)
                opening = 0
                break
        resigning = self.config.resign_threshold > -1.0
        return _GameInProgress(
            tree=self._new_tree(board, tree_rng), start_fen=start_fen, opening_plies=opening,
            features=[], actions=[], counts=[], root_values=[], movers=[],
            network_version=self.network_version,
            may_resign=resigning and self.rng.random() >= self.config.resign_playout_fraction,
            low_moves={chess.WHITE: 0, chess.BLACK: 0},
        )

    def step(self) -> list[GameRecord]:
        """One move in every running game; returns the games that finished with it.

        With playout cap randomisation, each move is a full search (noise, recorded) with
        probability ``full_search_fraction``, else a fast one (``fast_simulations``, no noise,
        played but not recorded).
        """
        config = self.config
        trees = [game.tree for game in self.games]
        temperatures = [
            1.0 if len(game.tree.board.move_stack) - game.opening_plies < config.temperature_plies else 0.0
            for game in self.games
        ]
        full = [config.full_search_fraction >= 1.0 or self.rng.random() < config.full_search_fraction
                for _ in self.games]
        budgets = [self.search_config.num_simulations if f else config.fast_simulations for f in full]
        results = self.mcts.search(trees, add_noise=full, temperature=temperatures, num_simulations=budgets)
        finished: list[GameRecord] = []
        for slot, (game, result, recorded) in enumerate(zip(self.games, results, full)):
            board = game.tree.board
            mover = board.turn
            if recorded:
                game.recorded_plies.append(len(board.move_stack))
                targets = result.target_counts
                kept = targets > 0
                game.features.append(encoding.board_features(board))
                game.actions.append(encoding.moves_to_actions(board, [m for m, k in zip(result.moves, kept) if k]))
                game.counts.append(targets[kept])
                game.root_values.append(result.root_value)
                game.movers.append(mover)
            self.positions_played += 1
            reason = None
            if self._resigns(game, mover, result.root_value):  # instead of playing its move
                white_value, reason = (-1.0 if mover == chess.WHITE else 1.0), RESIGNATION
            else:
                game.tree.advance(result.move, reuse=self.search_config.reuse_tree)
                status = terminal_status(board)
                if status is not None:
                    value_for_mover, reason = status
                    # value is for the side to move now; convert to White's point of view
                    white_value = value_for_mover if board.turn == chess.WHITE else -value_for_mover
                elif len(board.move_stack) >= config.max_plies:
                    white_value, reason = 0.0, MAX_LENGTH
            if reason is not None:
                finished.append(self._record(game, white_value, reason))
                self.games[slot] = None  # type: ignore[call-overload]
                self.games_played += 1
        if finished:
            # A new game in each finished slot, but never more games than the batch (restored games may be more).
            running = [game for game in self.games if game is not None]
            self.games = running + [self._new_game() for _ in range(config.games_per_worker - len(running))]
        return finished

    # -- games in flight across a restart ---------------------------------------------------------

    def snapshot(self) -> list[dict]:
        """The games in flight, as plain data: enough for ``restore`` to continue each where it is.

        Per game: the start position and every move since (as UCI), which plies were recorded with
        their policy targets and root values, its network version and resignation state. Planes are
        not kept: ``restore`` recomputes them by replaying the moves.
        """
        out = []
        for game in self.games:
            board = game.tree.board
            lengths = [len(a) for a in game.actions]
            out.append({
                "start_fen": game.start_fen, "moves": [m.uci() for m in board.move_stack],
                "opening_plies": game.opening_plies, "recorded_plies": list(game.recorded_plies),
                "target_lengths": lengths,
                "target_actions": np.concatenate(game.actions).astype(np.uint16) if lengths else np.zeros(0, np.uint16),
                "target_counts": np.concatenate(game.counts).astype(np.uint16) if lengths else np.zeros(0, np.uint16),
                "root_values": [float(v) for v in game.root_values], "network_version": game.network_version,
                "may_resign": game.may_resign, "low_moves": [game.low_moves[chess.WHITE], game.low_moves[chess.BLACK]],
                "would_resign": None if game.would_resign is None else bool(game.would_resign),
            })
        return out

    def restore(self, snapshots: list[dict]) -> None:
        """Continue the games of ``snapshots`` (from ``snapshot``) in place of fresh ones."""
        restored = []
        for snap in snapshots:
            board = chess.Board(snap["start_fen"])
            recorded = set(snap["recorded_plies"])
            features, movers = [], []
            for uci in snap["moves"]:
                if len(board.move_stack) in recorded:
                    features.append(encoding.board_features(board))
                    movers.append(board.turn)
                board.push_uci(uci)
            offsets = np.concatenate(([0], np.cumsum(snap["target_lengths"]))).astype(np.int64)
            actions = [snap["target_actions"][a:b] for a, b in zip(offsets[:-1], offsets[1:])]
            counts = [snap["target_counts"][a:b] for a, b in zip(offsets[:-1], offsets[1:])]
            if len(features) != len(snap["recorded_plies"]) or len(actions) != len(features):
                raise ValueError("a game in flight does not replay to its recorded positions")
            restored.append(_GameInProgress(
                tree=self._new_tree(board, np.random.default_rng(int(self.rng.integers(2**63)))),
                start_fen=snap["start_fen"], opening_plies=snap["opening_plies"], features=features,
                actions=actions, counts=counts, root_values=list(snap["root_values"]), movers=movers,
                network_version=snap["network_version"], recorded_plies=list(snap["recorded_plies"]),
                may_resign=snap["may_resign"],
                low_moves={chess.WHITE: snap["low_moves"][0], chess.BLACK: snap["low_moves"][1]},
                would_resign=snap["would_resign"],
            ))
        fresh = self.games[: max(0, self.config.games_per_worker - len(restored))]
        self.games = restored + fresh

    def _resigns(self, game: _GameInProgress, mover: chess.Color, root_value: float) -> bool:
        """Count the mover's hopeless searches; True when it resigns (never in a played-out game)."""
        config = self.config
        if config.resign_threshold <= -1.0:
            return False
        game.low_moves[mover] = game.low_moves[mover] + 1 if root_value < config.resign_threshold else 0
        if game.low_moves[mover] < config.resign_moves:
            return False
        if not game.may_resign:
            if game.would_resign is None:
                game.would_resign = mover
            return False
        return True

    def play(self, min_games: int, max_seconds: float | None = None) -> list[GameRecord]:
        """Step until ``min_games`` games have finished (or ``max_seconds`` passed); unfinished games carry over."""
        finished: list[GameRecord] = []
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        while len(finished) < min_games and (deadline is None or time.monotonic() < deadline):
            finished.extend(self.step())
        return finished

    def _record(self, game: _GameInProgress, white_value: float, reason: str) -> GameRecord:
        movers = np.array(game.movers, dtype=bool)  # True where White was to move
        z = np.where(movers, white_value, -white_value).astype(np.int8)
        counts = [c.astype(np.uint16) for c in game.counts]
        lengths = np.array([len(c) for c in counts], dtype=np.int64)
        board = game.tree.board
        result = result_string(white_value)
        pgn = game_pgn(board, {
            "Event": "self-play", "White": f"v{game.network_version}", "Black": f"v{game.network_version}",
            "Result": result, "Termination": reason,
        }, game.start_fen)
        # Under playout cap randomisation a short game can have no fully searched move: it is still a
        # game (its result and PGN count), with no training position.
        return GameRecord(
            planes=encoding.packed_from_features(game.features),
            policy_offsets=np.concatenate(([0], np.cumsum(lengths))).astype(np.int64),
            policy_actions=np.concatenate([np.zeros(0, np.uint16), *game.actions]).astype(np.uint16),
            policy_counts=np.concatenate([np.zeros(0, np.uint16), *counts]),
            z=z,
            root_values=np.array(game.root_values, dtype=np.float16),
            result=result,
            termination=reason,
            network_version=game.network_version,
            pgn=pgn,
            plies=len(board.move_stack),
            extra=self._resign_check(game, white_value, reason),
            moves_left=moves_left_targets(game.recorded_plies, len(board.move_stack), reason != MAX_LENGTH),
        )

    def _resign_check(self, game: _GameInProgress, white_value: float, reason: str) -> dict:
        """For a game played out under resignation: would a resignation have been wrong? A game that reached
        the length limit has no result to judge by (``unfinished``; most are wins not converted), so it is
        never counted as a false resignation."""
        if self.config.resign_threshold <= -1.0 or game.may_resign:
            return {}
        if game.would_resign is None:
            return {"resign_playout": True}
        if reason == MAX_LENGTH:
            return {"resign_playout": True, "would_resign": True, "unfinished": True, "false_resign": False}
        loser_lost = white_value == (-1.0 if game.would_resign == chess.WHITE else 1.0)
        return {"resign_playout": True, "would_resign": True, "unfinished": False, "false_resign": not loser_lost}


def moves_left_targets(recorded_plies: Sequence[int], plies: int, finished: bool) -> np.ndarray:
    """``int16 [T]``: the plies from each recorded position (its ``len(move_stack)``) to the game's end at
    ``plies``; -1 for every position of a game that did not finish (stopped at the length limit)."""
    if not finished:
        return np.full(len(recorded_plies), -1, dtype=np.int16)
    return np.minimum(plies - np.asarray(recorded_plies, dtype=np.int64), np.iinfo(np.int16).max).astype(np.int16)
