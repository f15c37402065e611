"""Players: anything that picks moves, made from one spec string everywhere (arena, puzzles, ratings).

========================================================= ==================================================
spec                                                      player
========================================================= ==================================================
``mcts:PATH?sims=N&cpuct=C&algorithm=A&mates=M&pst=T``    network with search (A: puct, the default, or gumbel;
                                                          M: 1, the default, finds mates in one, 0 not:
                                                          ``SearchConfig.mate_in_one``; T: the policy
                                                          temperature, ``SearchConfig.policy_temperature``,
                                                          1 by default; ``fpu=F``: first-play urgency,
                                                          an unvisited move's value is its parent's less F,
                                                          ``SearchConfig.fpu_reduction``; ``mu=U``: the material head's share
                                                          of the value the search reads, in place of the
                                                          network's ``material_utility``; ``reuse=1``: each
                                                          game's subtree is kept from move to move, the
                                                          search adding N simulations to it); PATH a network
                                                          file or a run directory (its current best network);
                                                          also ``backend=torch|onnx|openvino``,
                                                          ``precision=fp32|bf16|fp16|int8``, ``channels_last=0|1``
                                                          (``SearchConfig``)
``policy:PATH``                                           the raw network policy, most probable legal move
``random``                                                uniformly random legal move
``greedy``                                                mate in one, else the capture that wins the most
                                                          material, else random
``uci:COMMAND?Option Name=value&nodes=N&movetime=MS&depth=D`` any UCI engine with options and limits
``ab:material?depth=D&movetime=MS&nodes=N&hash=MB``       alpha-beta on the compiled board, material and
                                                          PeSTO tables (``alphazero.search.ab_player``);
                                                          no limit given: 100 ms a move
``ab:NNUE?depth=D&movetime=MS&nodes=N&hash=MB``           the same search evaluating with an NNUE file
                                                          (``alphazero nnue train --out``), quantised;
                                                          both take ``TECHNIQUE=0|1`` for each name of
                                                          ``alphabeta.TECHNIQUES`` (``lmp=0``, ...)
========================================================= ==================================================

Every player answers ``choose_moves(boards)`` for many games at once (the network players batch
them into one search). Boards are read, never changed. ``make_player(spec)`` raises ``InputError``
naming what is wrong with a bad spec.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Protocol, Sequence

import chess
import chess.engine
import numpy as np

from alphazero.board.game import MATE_CP
from alphazero.config import SearchConfig
from alphazero.errors import InputError, UserError
from alphazero.nets.evaluator import NetworkEvaluator
from alphazero.nets.network import PolicyValueNet, load_network
from alphazero.search.factory import build_search

# A network player's search where its spec and its caller name none: PUCT at 100 simulations. PUCT, not
# self-play's default Gumbel (alphazero.config.SearchConfig): every ladder and arena figure of an mcts: player
# in README and docs/RESULTS.md was measured with it; ``algorithm=gumbel`` in a spec plays Gumbel.
PLAYER_SEARCH = SearchConfig(num_simulations=100, algorithm="puct")

PIECE_VALUES = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9, chess.KING: 0}


class Player(Protocol):
    """``name``, ``choose_moves`` and ``close``. A player that knows what its moves are worth also keeps
    ``last_scores``: after each ``choose_moves`` call, one score per board, centipawns for the side to
    move (a mate as +-``MATE_CP``, None where it has none): the arena's adjudication reads them."""

    name: str

    def choose_moves(self, boards: Sequence[chess.Board]) -> list[chess.Move]: ...

    def close(self) -> None: ...


class RandomPlayer:
    """A uniformly random legal mover."""

    def __init__(self, seed: int | None = None, name: str = "random") -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)

    def choose_moves(self, boards: Sequence[chess.Board]) -> list[chess.Move]:
        out = []
        for board in boards:
            moves = list(board.legal_moves)
            out.append(moves[int(self.rng.integers(len(moves)))])
        return out

    def close(self) -> None:
        pass


def capture_gain(board: chess.Board, move: chess.Move) -> int:
    """Material a move captures (en passant counts a pawn), plus what a promotion adds."""
    gain = 0
    if board.is_en_passant(move):
        gain = 1
    else:
        captured = board.piece_type_at(move.to_square)
        if captured is not None:
            gain = PIECE_VALUES[captured]
    if move.promotion:
        gain += PIECE_VALUES[move.promotion] - 1
    return gain


class GreedyPlayer:
    """Mate in one if there is one, else the move capturing the most material, else random."""

    def __init__(self, seed: int | None = None, name: str = "greedy") -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)

    def choose_moves(self, boards: Sequence[chess.Board]) -> list[chess.Move]:
        return [self._choose(board) for board in boards]

    def _choose(self, board: chess.Board) -> chess.Move:
        moves = list(board.legal_moves)
        board = board.copy(stack=False)
        for move in moves:
            board.push(move)
            mate = board.is_checkmate()
            board.pop()
            if mate:
                return move
        gains = np.array([capture_gain(board, move) for move in moves])
        best = np.flatnonzero(gains == gains.max())
        return moves[int(self.rng.choice(best))]

    def close(self) -> None:
        pass


class PolicyPlayer:
    """The network's raw policy: its most probable legal move, no search."""

    def __init__(self, net: PolicyValueNet, name: str = "policy", device: str = "cpu", backend: str = "auto") -> None:
        self.name = name
        self.evaluator = NetworkEvaluator(net, device=device, backend=backend)

    def choose_moves(self, boards: Sequence[chess.Board]) -> list[chess.Move]:
        return [moves[int(np.argmax(priors))] for moves, priors, _ in self.evaluator.policy(boards)]

    def close(self) -> None:
        pass


class MCTSPlayer:
    """The network with search (PUCT or Gumbel): no noise, all games in one batched search.

    With ``reuse`` each game's tree is kept after the move played, and when the game comes back one
    opponent's move later the subtree under that reply is the new root: the search adds its
    ``num_simulations`` to the visits already there (as the UCI engine, lc0 and KataGo play). A game is
    known by its starting position and its moves, so boards must carry their move stack; a board that
    continues no kept tree gets a fresh one. A kept tree no call has continued within ``KEEP_CALLS`` calls
    is dropped (an arena asks again one call later: each call holds the games where this player is to move).
    """

    KEEP_CALLS = 4

    def __init__(self, net: PolicyValueNet, search: SearchConfig, name: str = "mcts", device: str = "cpu",
                 reuse: bool = False) -> None:
        self.name = name
        self.reuse = reuse
        self.evaluator = NetworkEvaluator.for_search(net, search, device=device)
        self.mcts, self._new_tree = build_search(self.evaluator, search)
        self._calls = 0
        self._kept: dict[tuple[str, tuple[chess.Move, ...]], tuple[int, Any]] = {}  # key -> (call, tree)

    def choose_moves(self, boards: Sequence[chess.Board]) -> list[chess.Move]:
        if not boards:
            return []
        self._calls += 1
        trees = []
        for board in boards:
            kept = self._kept.pop(_game_key(board, len(board.move_stack) - 1), None) if self.reuse and board.move_stack else None
            if kept is not None:
                tree = kept[1]
                tree.advance(board.move_stack[-1], reuse=True)
            else:
                tree = self._new_tree(board, 0)
            trees.append(tree)
        results = self.mcts.search(trees, add_noise=False, temperature=0.0)
        if self.reuse:
            self._kept = {key: kept for key, kept in self._kept.items() if kept[0] > self._calls - self.KEEP_CALLS}
            for tree, result in zip(trees, results):
                tree.advance(result.move, reuse=True)
                self._kept[_game_key(tree.board)] = (self._calls, tree)
        return [result.move for result in results]

    def close(self) -> None:
        self._kept = {}


def _game_key(board: chess.Board, plies: int | None = None) -> tuple[str, tuple[chess.Move, ...]]:
    """A game as its starting position and its first ``plies`` moves (all of them by default)."""
    stack = board.move_stack if plies is None else board.move_stack[:plies]
    return board.root().fen(), tuple(stack)


class UCIPlayer:
    """A UCI engine (e.g. Stockfish) with options and a search limit; one engine process."""

    def __init__(self, command: str, options: dict[str, str], limit: chess.engine.Limit, name: str) -> None:
        self.name = name
        self.limit = limit
        try:
            self.engine = chess.engine.SimpleEngine.popen_uci(shlex.split(command))
        except (FileNotFoundError, PermissionError, OSError, chess.engine.EngineError) as error:
            raise InputError(f"uci engine {command!r} could not be started: {error}") from None
        known = {option.lower(): option for option in self.engine.options}
        unknown = [key for key in options if key.lower() not in known]
        if unknown:
            self.engine.quit()
            raise InputError(f"uci engine {command!r} has no option {unknown[0]!r} "
                             f"(its options: {', '.join(sorted(known.values(), key=str.lower))})")
        try:
            self.engine.configure({known[key.lower()]: value for key, value in options.items()})
            self.last_scores: list[int | None] = []
        except (ValueError, chess.engine.EngineError) as error:
            self.engine.quit()
            raise InputError(f"uci engine {command!r}: bad option value: {error}") from None

    def choose_moves(self, boards: Sequence[chess.Board]) -> list[chess.Move]:
        moves = []
        self.last_scores = []
        for board in boards:
            result = self.engine.play(board, self.limit, info=chess.engine.INFO_SCORE)
            if result.move is None:
                raise RuntimeError(f"{self.name} returned no move for {board.fen()}")
            moves.append(result.move)
            score = result.info.get("score")
            self.last_scores.append(None if score is None else score.relative.score(mate_score=MATE_CP))
        return moves

    def close(self) -> None:
        try:
            self.engine.quit()
        except (chess.engine.EngineTerminatedError, chess.engine.EngineError):
            pass


def resolve_network_path(path: str) -> Path:
    """A network file, or a run directory meaning its current best network."""
    candidate = Path(path)
    if candidate.is_dir():
        from alphazero.checkpoint import RunDirectory

        run = RunDirectory(candidate)
        state = run.read_state()
        return run.network_path(state.best_generation)
    if not candidate.is_file():
        raise InputError(f"no network file or run directory at {path!r}")
    return candidate


def _parse_query(spec: str, query: str) -> dict[str, str]:
    params: dict[str, str] = {}
    if not query:
        return params
    for part in query.split("&"):
        if "=" not in part:
            raise InputError(f"player spec {spec!r}: parameter {part!r} is not name=value")
        key, value = part.split("=", 1)
        if key.strip().lower() in (known.lower() for known in params):  # UCI option names ignore case
            raise InputError(f"player spec {spec!r}: {key.strip()} is given twice")
        params[key.strip()] = value.strip()
    return params


def _number(spec: str, key: str, value: str, kind: type) -> float | int:
    try:
        number = kind(value)
    except ValueError:
        raise InputError(f"player spec {spec!r}: {key}={value!r} is not a valid {kind.__name__}") from None
    if number <= 0:
        raise InputError(f"player spec {spec!r}: {key} must be positive")
    return number


def parse_uci_spec(spec: str) -> tuple[str, dict[str, str], chess.engine.Limit]:
    """``uci:COMMAND?Option Name=value&nodes=N&movetime=MS&depth=D`` -> (command, engine options, limit).

    ``nodes``, ``depth`` and ``movetime`` make the search limit (100 ms when none is given); every
    other parameter is a UCI option. Raises ``InputError`` naming the spec; starts no engine.
    """
    spec = spec.strip()
    kind, _, rest = spec.partition(":")
    if kind.lower() != "uci":
        raise InputError(f"spec {spec!r}: expected uci:COMMAND?Option=value&depth=D&nodes=N&movetime=MS")
    command, _, query = rest.partition("?")
    if not command:
        raise InputError(f"player spec {spec!r}: missing engine command (uci:COMMAND)")
    params = _parse_query(spec, query)
    limits: dict = {}
    options: dict[str, str] = {}
    for key, value in params.items():
        if key == "nodes":
            limits["nodes"] = int(_number(spec, key, value, int))
        elif key == "depth":
            limits["depth"] = int(_number(spec, key, value, int))
        elif key == "movetime":
            limits["time"] = float(_number(spec, key, value, float)) / 1000.0
        else:
            options[key] = value
    if not limits:
        limits["time"] = 0.1
    return command, options, chess.engine.Limit(**limits)


def make_player(spec: str, seed: int | None = None, search: SearchConfig | None = None, device: str = "cpu") -> Player:
    """Build a player from its spec string (table in the module docstring)."""
    spec = spec.strip()
    kind, _, rest = spec.partition(":")
    kind = kind.lower()
    if kind in ("random", "greedy"):
        if rest:
            raise InputError(f"player spec {spec!r}: {kind} takes no path or parameters")
        return (RandomPlayer if kind == "random" else GreedyPlayer)(seed, name=spec)
    if kind in ("mcts", "policy"):
        path, _, query = rest.partition("?")
        if not path:
            raise InputError(f"player spec {spec!r}: missing network path ({kind}:PATH)")
        params = _parse_query(spec, query)
        # Parameters are checked before the network is read, so a typo is reported at once.
        if kind == "policy" and params:
            raise InputError(f"player spec {spec!r}: policy takes no parameters")
        changes: dict = {}
        material_utility: float | None = None
        reuse = False
        for key, value in params.items():
            if (key in ("sims", "nodes") and "num_simulations" in changes) or (key in ("cpuct", "c_puct") and "c_puct" in changes):
                raise InputError(f"player spec {spec!r}: {key} is given twice (sims and nodes, cpuct and c_puct "
                                 "are one parameter each)")
            if key in ("sims", "nodes"):
                changes["num_simulations"] = int(_number(spec, key, value, int))
            elif key in ("cpuct", "c_puct"):
                changes["c_puct"] = float(_number(spec, key, value, float))
            elif key == "algorithm":
                if value not in ("puct", "gumbel"):
                    raise InputError(f"player spec {spec!r}: algorithm must be puct or gumbel, got {value!r}")
                changes["algorithm"] = value
            elif key in ("mates", "channels_last", "reuse"):
                if value not in ("0", "1"):
                    raise InputError(f"player spec {spec!r}: {key} must be 0 or 1, got {value!r}")
                if key == "reuse":
                    reuse = value == "1"
                else:
                    changes["mate_in_one" if key == "mates" else key] = value == "1"
            elif key in ("precision", "backend"):
                changes[key] = value
            elif key == "pst":
                changes["policy_temperature"] = float(_number(spec, key, value, float))
            elif key == "fpu":  # 0: an unvisited move starts at its parent's value; below 0, above it
                try:
                    fpu = float(value)
                except ValueError:
                    fpu = float("nan")
                if not -1.0 < fpu < 2.0:
                    raise InputError(f"player spec {spec!r}: fpu must be in (-1, 2), got {value!r}")
                changes["fpu_reduction"] = fpu
            elif key == "mu":
                try:
                    material_utility = float(value)
                except ValueError:
                    material_utility = float("nan")
                if not 0.0 <= material_utility <= 1.0:
                    raise InputError(f"player spec {spec!r}: mu must be in [0, 1], got {value!r}")
            else:
                raise InputError(f"player spec {spec!r}: unknown parameter {key!r} (known: sims, cpuct, fpu, algorithm, mates, "
                                 "pst, mu, reuse, backend, precision, channels_last)")
        from dataclasses import replace

        try:
            config = replace(search or PLAYER_SEARCH, **changes)
        except ValueError as error:  # a precision or backend SearchConfig refuses, or a pairing of them
            raise InputError(f"player spec {spec!r}: {error}") from None
        try:
            net = load_network(resolve_network_path(path))
        except UserError as error:
            raise InputError(f"player spec {spec!r}: {error}") from None
        if material_utility is not None:
            if material_utility > 0 and not net.config.material_head:
                raise InputError(f"player spec {spec!r}: mu needs a network with a material head ({path} has none)")
            net.config = replace(net.config, material_utility=material_utility)
        if kind == "policy":
            return PolicyPlayer(net, name=spec, device=device, backend=search.backend if search else "auto")
        return MCTSPlayer(net, config, name=spec, device=device, reuse=reuse)
    if kind == "uci":
        command, options, limit = parse_uci_spec(spec)
        return UCIPlayer(command, options, limit, name=spec)
    if kind == "ab":
        from alphazero.search.ab_player import (
            make_ab_player,  # numba loads only when asked for
        )

        return make_ab_player(spec)
    raise InputError(f"player spec {spec!r}: unknown kind {kind!r} (known: mcts, policy, random, greedy, uci, ab)")
