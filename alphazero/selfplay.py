"""Self-play: many games at once through one batched search, yielding ``GameRecord``s.

``SelfPlayer`` keeps ``games_per_worker`` games in flight. Each step searches every running game
together (one network call per simulation round for all of them), records the position and the
visit counts, plays the chosen move and starts a new game in the slot of any game that ended. The
same class runs in a plain process or inside a Ray actor (``workers.actors``).
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass
from typing import Callable

import chess
import chess.pgn
import numpy as np

from alphazero import encoding
from alphazero.config import SelfPlayConfig
from alphazero.game import MAX_LENGTH, result_string, terminal_status
from alphazero.mcts import MCTS, Evaluator, GameTree, SearchConfig
from alphazero.replay import GameRecord


@dataclass
class _GameInProgress:
    tree: GameTree
    start_fen: str
    opening_plies: int
    features: list
    actions: list
    counts: list
    root_values: list
    movers: list  # chess.Color of the side to move at each recorded position
    network_version: int


def game_pgn(board: chess.Board, headers: dict[str, str], start_fen: str | None = None) -> str:
    """The game on ``board`` (its move stack) as PGN text with ``headers``."""
    game = chess.pgn.Game()
    start = chess.Board(start_fen) if start_fen else chess.Board()
    if start_fen and start_fen != chess.STARTING_FEN:
        game.setup(start)
    node = game
    for move in board.move_stack:
        node = node.add_variation(move)
    for key, value in headers.items():
        game.headers[key] = value
    buffer = io.StringIO()
    print(game, file=buffer, end="")
    return buffer.getvalue()


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
        self.mcts = MCTS(evaluator, search)
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
        return _GameInProgress(
            tree=GameTree(board, tree_rng), start_fen=start_fen, opening_plies=opening,
            features=[], actions=[], counts=[], root_values=[], movers=[],
            network_version=self.network_version,
        )

    def step(self) -> list[GameRecord]:
        """One move in every running game; returns the games that finished with it."""
        trees = [game.tree for game in self.games]
        temperatures = [
            1.0 if len(game.tree.board.move_stack) - game.opening_plies < self.config.temperature_plies else 0.0
            for game in self.games
        ]
        results = self.mcts.search(trees, add_noise=True, temperature=temperatures)
        finished: list[GameRecord] = []
        for slot, (game, result) in enumerate(zip(self.games, results)):
            board = game.tree.board
            visited = result.visit_counts > 0
            game.features.append(encoding.board_features(board))
            game.actions.append(encoding.moves_to_actions(board, [m for m, v in zip(result.moves, visited) if v]))
            game.counts.append(result.visit_counts[visited])
            game.root_values.append(result.root_value)
            game.movers.append(board.turn)
            game.tree.advance(result.move, reuse=self.search_config.reuse_tree)
            self.positions_played += 1
            status = terminal_status(board)
            reason = None
            if status is not None:
                value_for_mover, reason = status
                # value is for the side to move now; convert to White's point of view
                white_value = value_for_mover if board.turn == chess.WHITE else -value_for_mover
            elif len(board.move_stack) >= self.config.max_plies:
                white_value, reason = 0.0, MAX_LENGTH
            if reason is not None:
                finished.append(self._record(game, white_value, reason))
                self.games[slot] = self._new_game()
                self.games_played += 1
        return finished

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
        return GameRecord(
            planes=encoding.packed_from_features(game.features),
            policy_offsets=np.concatenate(([0], np.cumsum(lengths))),
            policy_actions=np.concatenate(game.actions).astype(np.uint16),
            policy_counts=np.concatenate(counts),
            z=z,
            root_values=np.array(game.root_values, dtype=np.float16),
            result=result,
            termination=reason,
            network_version=game.network_version,
            pgn=pgn,
            plies=len(board.move_stack),
        )
