"""Matches between two players: openings, many games at once, adjudication, results and PGN.

Each opening is played twice, colours swapped (a game pair). Games end by the rules (checkmate,
stalemate, insufficient material, fifty moves, threefold repetition, applied automatically) or at
``max_plies``, scored as a draw and reported as such; with an ``Adjudication``, also when both players'
own scores agree that the game is decided or dead (fishtest's rules, below). All running games are advanced together: per
step each player gets one ``choose_moves`` call with every board where it is to move, so a network
player searches all of its games in one batch. The training arena (``workers``) plays a ``Match``
a slice of time at a time so its games are saved as they end; ``alphazero arena`` uses ``play_match``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import chess
import chess.polyglot
import numpy as np

from alphazero.board.game import (
    ADJUDICATED_DRAW,
    ADJUDICATED_WIN,
    MAX_LENGTH,
    game_pgn,
    result_string,
    terminal_status,
    white_score,
)
from alphazero.errors import InputError
from alphazero.fileio import input_file, text_lines
from alphazero.judge.players import Player


@dataclass(frozen=True)
class Opening:
    name: str
    fen: str  # start position
    moves: tuple[str, ...] = ()  # UCI moves played from ``fen`` before the players take over


@dataclass
class GameResult:
    index: int  # position in the schedule: pair = index // 2
    opening: Opening
    white: str
    black: str
    result: str  # "1-0", "0-1", "1/2-1/2"
    termination: str
    plies: int
    pgn: str
    a_is_white: bool

    @property
    def score_a(self) -> float:
        """Score of player A (the first player of the match) in this game."""
        white = white_score(self.result)
        return white if self.a_is_white else 1.0 - white


@dataclass
class MatchOutcome:
    player_a: str
    player_b: str
    games: list[GameResult] = field(default_factory=list)
    stopped_early: bool = False

    @property
    def wins(self) -> int:
        return sum(1 for g in self.games if g.score_a == 1.0)

    @property
    def draws(self) -> int:
        return sum(1 for g in self.games if g.score_a == 0.5)

    @property
    def losses(self) -> int:
        return sum(1 for g in self.games if g.score_a == 0.0)

    @property
    def score(self) -> float:
        return (self.wins + 0.5 * self.draws) / len(self.games) if self.games else 0.0

    def pair_scores(self) -> list[float]:
        """Summed score of A over each complete game pair (0, 0.5, ..., 2)."""
        by_pair: dict[int, list[float]] = {}
        for game in self.games:
            by_pair.setdefault(game.index // 2, []).append(game.score_a)
        return [sum(scores) for scores in by_pair.values() if len(scores) == 2]

    def terminations(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for game in self.games:
            counts[game.termination] = counts.get(game.termination, 0) + 1
        return counts


def random_openings(count: int, plies: int, seed: int = 0) -> list[Opening]:
    """``count`` distinct openings of ``plies`` uniformly random moves from the start (none finished)."""
    rng = np.random.default_rng(seed)
    openings: list[Opening] = []
    seen: set[str] = set()
    attempts = 0
    while len(openings) < count:
        attempts += 1
        board = chess.Board()
        moves = []
        for _ in range(plies):
            legal = list(board.legal_moves)
            move = legal[int(rng.integers(len(legal)))]
            board.push(move)
            moves.append(move.uci())
        key = board.fen()
        if terminal_status(board) is not None or (key in seen and attempts < 50 * count):
            continue
        seen.add(key)
        openings.append(Opening(name=" ".join(moves) or "startpos", fen=chess.STARTING_FEN, moves=tuple(moves)))
    return openings


def book_openings(path: str | Path, count: int, plies: int = 8, seed: int = 0) -> list[Opening]:
    """Openings from a polyglot book (weighted random walk of ``plies`` book moves) or an EPD/FEN file.

    An EPD/FEN file holds one position a line; blank lines and lines starting with ``#`` are skipped.
    A file that is not a book nor text, or a line that is not a legal unfinished position, raises
    ``InputError`` naming the file and the line (every line of the file counted)."""
    path = input_file(path, "opening file")
    rng = np.random.default_rng(seed)
    if path.suffix.lower() == ".bin":
        return _polyglot_openings(path, count, plies, rng)
    positions = []
    for number, text in enumerate(text_lines(path, "opening file"), 1):
        line = text.strip()
        if not line or line.startswith("#"):
            continue
        try:
            board, _ = chess.Board.from_epd(line) if len(line.split()) < 6 or ";" in line else (chess.Board(line), None)
        except ValueError as error:
            raise InputError(f"{path}:{number}: not a FEN/EPD position: {error}") from None
        if not board.is_valid() or terminal_status(board) is not None:
            raise InputError(f"{path}:{number}: illegal or finished position {line!r}")
        positions.append(Opening(f"{path.name}:{number}", board.fen()))
    if not positions:
        raise InputError(f"opening file {path} holds no positions")
    order = rng.permutation(len(positions)) if count < len(positions) else np.arange(len(positions))
    return [positions[i] for i in order[:count]] if count < len(positions) else [positions[i % len(positions)] for i in range(count)]


def _polyglot_openings(path: Path, count: int, plies: int, rng: np.random.Generator) -> list[Opening]:
    """Up to ``count`` distinct unfinished openings, each a walk of ``plies`` book moves chosen by weight."""
    size = path.stat().st_size
    if size % 16:  # a polyglot entry is 16 bytes
        raise InputError(f"opening book {path} is not a polyglot book: its size ({size} bytes) is not a multiple of 16")
    openings: list[Opening] = []
    seen: set[str] = set()
    try:
        with chess.polyglot.open_reader(path) as reader:
            for _ in range(count * 20):
                if len(openings) == count:
                    break
                board = chess.Board()
                moves = []
                for _ in range(plies):
                    entries = list(reader.find_all(board))
                    if not entries:
                        break
                    weights = np.array([e.weight for e in entries], dtype=np.float64) + 1e-9
                    entry = entries[int(rng.choice(len(entries), p=weights / weights.sum()))]
                    board.push(entry.move)
                    moves.append(entry.move.uci())
                if moves and board.fen() not in seen and terminal_status(board) is None:
                    seen.add(board.fen())
                    openings.append(Opening(" ".join(moves), chess.STARTING_FEN, tuple(moves)))
    except OSError as error:
        raise InputError(f"opening book {path}: {error.strerror or error}") from None
    if not openings:
        raise InputError(f"opening book {path} gave no openings")
    return openings


@dataclass(frozen=True)
class Adjudication:
    """Fishtest's adjudication (cutechess-cli ``-draw movenumber=34 movecount=8 score=20 -resign
    movecount=3 score=600 twosided=true``), on the scores the players report for their own moves
    (``Player.last_scores``: centipawns for the side to move).

    A draw once the game has reached move ``draw_move_number`` and the last ``draw_move_count`` moves
    of each side were scored within +-``draw_score``; a win once the last ``resign_move_count`` moves
    of each side were scored at least ``resign_score`` for the same side (both players agree). A game
    where a player reports no score (random, greedy, policy, mcts players) is never adjudicated."""

    draw_move_number: int = 34
    draw_move_count: int = 8
    draw_score: int = 20
    resign_move_count: int = 3
    resign_score: int = 600

    def __post_init__(self) -> None:
        if min(self.draw_move_count, self.resign_move_count) < 1 or self.draw_score < 0 or self.resign_score < 1:
            raise InputError(f"bad adjudication settings: {self}")

    def decide(self, board: chess.Board, white_scores: Sequence[int | None]) -> tuple[float, str] | None:
        """(White's value +1 / 0 / -1, termination) when the game is adjudicated after its last move,
        given the White-view scores of every move played since the players took over (None: unscored)."""
        resign = 2 * self.resign_move_count
        if len(white_scores) >= resign:
            last = white_scores[-resign:]
            if all(score is not None and score >= self.resign_score for score in last):
                return 1.0, ADJUDICATED_WIN
            if all(score is not None and score <= -self.resign_score for score in last):
                return -1.0, ADJUDICATED_WIN
        draw = 2 * self.draw_move_count
        if board.fullmove_number >= self.draw_move_number and len(white_scores) >= draw:
            if all(score is not None and abs(score) <= self.draw_score for score in white_scores[-draw:]):
                return 0.0, ADJUDICATED_DRAW
        return None


@dataclass
class _Running:
    index: int
    opening: Opening
    board: chess.Board
    a_is_white: bool
    start_fen: str
    white_scores: list[int | None] = field(default_factory=list)  # each move's score, White's view


ScheduledGame = tuple[int, Opening, bool]  # (game index, opening, A plays White)


def match_schedule(openings: Sequence[Opening]) -> list[ScheduledGame]:
    """Every opening twice, A White first: game ``i`` is opening ``i // 2``, A White when ``i`` is even."""
    return [(2 * i + colour, opening, colour == 0) for i, opening in enumerate(openings) for colour in (0, 1)]


class Match:
    """A match in progress between two players over a schedule of games; ``advance`` plays it on.

    Up to ``concurrency`` games run at once. Per step each player gets one ``choose_moves`` call
    with every board where it is to move, so a network player searches all its games in one batch.
    The schedule may be any subset of a match's games (a resumed arena plays only the missing
    ones); each result keeps its index in the full match.
    """

    def __init__(self, player_a: Player, player_b: Player, schedule: Sequence[ScheduledGame], max_plies: int = 400,
                 concurrency: int = 64, event: str = "arena", played: Mapping[int, Sequence[str]] | None = None,
                 adjudication: Adjudication | None = None) -> None:
        self.player_a, self.player_b = player_a, player_b
        self.schedule = list(schedule)
        self.max_plies, self.concurrency, self.event = max_plies, concurrency, event
        self.adjudication = adjudication
        self.played = dict(played or {})  # game index -> UCI moves already played after its opening
        self.running: list[_Running] = []
        self.next_game = 0

    @property
    def done(self) -> bool:
        return self.next_game >= len(self.schedule) and not self.running

    def _start(self, entry: ScheduledGame) -> _Running:
        index, opening, a_is_white = entry
        board = chess.Board(opening.fen)
        for uci in (*opening.moves, *self.played.get(index, ())):
            board.push_uci(uci)
        return _Running(index, opening, board, a_is_white, opening.fen)

    def in_flight(self) -> dict[int, list[str]]:
        """The moves played so far (after the opening) in every running game, by game index."""
        return {game.index: [m.uci() for m in game.board.move_stack[len(game.opening.moves):]] for game in self.running}

    def step(self) -> list[GameResult]:
        """One ply in every running game (new games start first); returns the games that ended."""
        while self.next_game < len(self.schedule) and len(self.running) < self.concurrency:
            self.running.append(self._start(self.schedule[self.next_game]))
            self.next_game += 1
        player_a, player_b = self.player_a, self.player_b
        # A moves where (A is white) == (White to move), B elsewhere. Both players choose before any
        # board changes, so nobody is asked to move in a finished game.
        a_to_move = [g for g in self.running if g.a_is_white == (g.board.turn == chess.WHITE)]
        b_to_move = [g for g in self.running if g.a_is_white != (g.board.turn == chess.WHITE)]
        chosen: list[tuple[Player, _Running, chess.Move, int | None]] = []
        for player, games in ((player_a, a_to_move), (player_b, b_to_move)):
            if games:
                moves = player.choose_moves([g.board for g in games])
                scores = getattr(player, "last_scores", None) if self.adjudication is not None else None
                if scores is None or len(scores) != len(games):
                    scores = [None] * len(games)
                chosen.extend((player, game, move, score) for game, move, score in zip(games, moves, scores))
        for player, game, move, score in chosen:
            if move not in game.board.legal_moves:
                raise RuntimeError(f"{player.name} chose illegal move {move} in {game.board.fen()}")
            if score is not None and game.board.turn == chess.BLACK:
                score = -score
            game.white_scores.append(score)
            game.board.push(move)
        still: list[_Running] = []
        finished: list[GameResult] = []
        for game in self.running:
            status = terminal_status(game.board)
            adjudged = None
            if status is None and self.adjudication is not None:
                adjudged = self.adjudication.decide(game.board, game.white_scores)
            if status is None and adjudged is None and len(game.board.move_stack) - len(game.opening.moves) < self.max_plies:
                still.append(game)
                continue
            if status is not None:
                value, reason = status
                white_value = value if game.board.turn == chess.WHITE else -value
            elif adjudged is not None:
                white_value, reason = adjudged
            else:
                white_value, reason = 0.0, MAX_LENGTH
            white, black = (player_a.name, player_b.name) if game.a_is_white else (player_b.name, player_a.name)
            result = result_string(white_value)
            headers = {
                "Event": self.event, "Site": "local", "Date": time.strftime("%Y.%m.%d"), "Round": str(game.index + 1),
                "White": white, "Black": black, "Result": result, "Opening": game.opening.name,
                "Termination": reason,
            }
            finished.append(GameResult(game.index, game.opening, white, black, result, reason, len(game.board.move_stack),
                                       game_pgn(game.board, headers, game.start_fen), game.a_is_white))
        self.running = still
        return finished

    def advance(self, max_seconds: float) -> list[GameResult]:
        """Play until some games end, the match is done, or ``max_seconds`` pass; returns the ended games.

        Returning at the first finished games lets the caller save each game within one ply of its
        end; the running games stay here, so batching across them is not lost.
        """
        deadline = time.monotonic() + max_seconds
        finished: list[GameResult] = []
        while not self.done and not finished and time.monotonic() < deadline:
            finished = self.step()
        return finished


def play_match(
    player_a: Player,
    player_b: Player,
    openings: Sequence[Opening],
    max_plies: int = 400,
    concurrency: int = 64,
    on_game: Callable[[GameResult, "MatchOutcome"], bool] | None = None,
    event: str = "arena",
    adjudication: Adjudication | None = None,
) -> MatchOutcome:
    """Play every opening twice (A white, then A black); up to ``concurrency`` games at once.

    ``on_game(result, outcome_so_far)`` is called as each game ends; returning True stops the
    match (games still running are abandoned and not counted), e.g. when an SPRT has decided.
    """
    match = Match(player_a, player_b, match_schedule(openings), max_plies, concurrency, event,
                  adjudication=adjudication)
    outcome = MatchOutcome(player_a.name, player_b.name)
    while not match.done:
        stop = False
        for record in match.step():
            outcome.games.append(record)
            if on_game is not None and on_game(record, outcome):
                stop = True
        if stop:
            outcome.stopped_early = not match.done
            break
    return outcome
