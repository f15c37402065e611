"""Positions read from the files the project labels or learns from, with the place of every bad line.

Owns reading and validating positions from four kinds of source; knows nothing of engines, torch or
Ray:

- a **run directory** (or its ``replay/`` folder): every game of every replay shard, replayed from
  the PGN the shard keeps for it. The PGN is the faithful record of a game (the shard's packed planes
  drop the halfmove clock and are only the recorded subset of positions), so this yields every
  position of the game, a superset of the positions the shard trained on.
- a **PGN file** (``.pgn``): every position of the main line of every game.
- an **EPD or one-FEN-per-line file**: one position a line, a full FEN or EPD (four fields plus
  optional operations such as ``hmvc``/``fmvn``); blank lines and lines starting with ``#`` are
  ignored. A ``.csv`` file with a ``fen`` column (the output of ``alphazero label``, the files of
  ``../shared/data``) is read through that column.
- a file in **bullet's text format** (``FEN | score | result``, ``alphazero.learn.bullet_text``): its FENs.

Positions are full FENs (``board.fen()``), positions without a legal move left out (a game's final
checkmate or stalemate: nothing to label). Two FENs are the same position when their first four fields
agree (``position_key``: placement, side to move, castling, en passant); the move counters do not
make a position new.

A bad line (an illegal FEN, a PGN game python-chess cannot parse or whose moves are illegal, an
unreadable shard) goes to ``on_bad`` as a ``BadInput`` naming the file and line, and reading goes on;
callers that must stop raise from ``on_bad`` (``raise_bad``).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Protocol, TextIO, TypeVar, cast

import chess
import chess.pgn
import numpy as np

from alphazero.board.encoding import board_from_fen
from alphazero.board.game import legal_move
from alphazero.errors import InputError
from alphazero.learn.bullet_text import looks_like_bullet
from alphazero.learn.bullet_text import parse_line as parse_bullet_line


@dataclass(frozen=True)
class BadInput:
    """One input line that was not a position: ``where`` is ``FILE:LINE`` (or a shard and game)."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


OnBad = Callable[[BadInput], None]


def raise_bad(bad: BadInput) -> None:
    """An ``on_bad`` that stops at the first bad line with an ``InputError`` naming it."""
    raise InputError(str(bad))


def position_key(fen: str) -> str:
    """The identity of a position: the first four FEN fields (move counters dropped)."""
    return " ".join(fen.split()[:4])


def has_legal_move(board: chess.Board) -> bool:
    return any(True for _ in board.generate_legal_moves())


def source_kind(path: str | os.PathLike) -> str:
    """``replay`` (a directory), ``pgn``, ``csv``, ``book`` (a polyglot ``.bin``: openings to play from, not
    positions to read; ``alphazero label`` plays games from it), ``bullet`` (bullet's text format,
    ``alphazero.learn.bullet_text``, found by its first line) or ``epd`` (anything else: one position
    a line)."""
    path = Path(path)
    if path.is_dir():
        return "replay"
    if not path.is_file():
        raise InputError(f"{path}: no such file or directory")
    suffix = path.suffix.lower()
    kind = {".pgn": "pgn", ".csv": "csv", ".bin": "book"}.get(suffix, "epd")
    return "bullet" if kind == "epd" and looks_like_bullet(path) else kind


# ---- PGN --------------------------------------------------------------------------------------


class _LineReader:
    """A text handle that counts the lines ``chess.pgn.read_game`` reads (for error locations)."""

    def __init__(self, handle: TextIO, first_line: int = 1) -> None:
        self.handle = handle
        self.line = first_line - 1  # number of the line read last
        self.game_line: int | None = None  # first line of the game being read

    def readline(self) -> str:
        text = self.handle.readline()
        if text:
            self.line += 1
            if self.game_line is None and text.strip() and not text.startswith(("%", ";")):
                self.game_line = self.line
        return text


def _quiet_builder(reader: _LineReader, errors: list[tuple[int, str]]) -> Callable[[], chess.pgn.GameBuilder]:
    """A ``GameBuilder`` that records each parse error with its line instead of logging a traceback."""

    class Builder(chess.pgn.GameBuilder):
        def handle_error(self, error: Exception) -> None:
            errors.append((reader.line, str(error)))

    return Builder


def read_pgn_games(handle: TextIO, name: str, on_bad: OnBad) -> Iterator[tuple[int, chess.pgn.Game]]:
    """``(first line, game)`` for every game python-chess parses without error; the others go to ``on_bad``.

    A game with an illegal or unparsable move, or a bad ``FEN`` header, is skipped whole (its line is
    the line of the first error) rather than cut short.
    """
    reader = _LineReader(handle)
    while True:
        errors: list[tuple[int, str]] = []
        reader.game_line = None
        # read_game only calls readline(): the line-counting reader stands in for the text handle.
        game = chess.pgn.read_game(cast(TextIO, reader), Visitor=_quiet_builder(reader, errors))
        if game is None:
            return
        start = reader.game_line or reader.line
        if errors:
            line, message = errors[0]
            on_bad(BadInput(f"{name}:{line}", f"PGN game starting at line {start} is unreadable ({message})"))
            continue
        yield start, game


def _game_fens(game: chess.pgn.Game) -> Iterator[str]:
    """Every position of the main line that has a legal move, in play order."""
    board = game.board()
    for move in game.mainline_moves():
        yield board.fen()
        board.push(move)
    if has_legal_move(board):
        yield board.fen()


def _pgn_fens(path: Path, on_bad: OnBad) -> Iterator[str]:
    with open(path, encoding="utf-8", errors="replace") as handle:
        for _, game in read_pgn_games(handle, str(path), on_bad):
            yield from _game_fens(game)


# ---- run directory ----------------------------------------------------------------------------


def _replay_fens(path: Path, on_bad: OnBad) -> Iterator[str]:
    import io

    from alphazero.learn.replay import read_shard, shard_paths

    replay_dir = path / "replay" if (path / "replay").is_dir() else path
    paths = shard_paths(replay_dir)
    if not paths:
        raise InputError(f"{path}: no replay shards (expected a run directory or its replay/ folder)")
    for shard_path in paths:
        try:
            shard = read_shard(shard_path)
        except ValueError as error:
            on_bad(BadInput(str(shard_path), f"{error}"))
            continue
        for number, pgn in enumerate(shard.pgns):
            for _, game in read_pgn_games(io.StringIO(pgn), f"{shard_path} (game {number})", on_bad):
                yield from _game_fens(game)


# ---- EPD / FEN lines and CSV ------------------------------------------------------------------


def parse_position_line(text: str) -> chess.Board:
    """A full FEN or an EPD line -> a valid board; ``ValueError`` saying what is wrong."""
    fields = text.split()
    if len(fields) < 4:
        shown = text if len(text) <= 80 else text[:77] + "..."  # a binary file's "line" may be long
        raise ValueError(f"not a FEN or EPD: {shown!r}")
    if len(fields) >= 6 and fields[4].isdigit() and fields[5].isdigit():
        return board_from_fen(" ".join(fields[:6]))
    try:
        board = chess.Board()
        board.set_epd(text)
    except ValueError as error:
        raise ValueError(f"illegal FEN/EPD {text!r}: {error}") from None
    return board_from_fen(board.fen())


def position_and_move(fen: str, move: str, where: str, what: str = "best_uci") -> tuple[chess.Board, chess.Move]:
    """A data row's position (FEN or EPD, ``parse_position_line``) and its move (UCI, legal there; ``what``
    names the column); ``InputError`` naming ``where`` (``FILE:LINE``) and what is wrong."""
    try:
        board = parse_position_line(fen)
        return board, legal_move(board, move, what)
    except ValueError as error:
        raise InputError(f"{where}: {error}") from None


def _line_fens(path: Path, on_bad: OnBad) -> Iterator[str]:
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, text in enumerate(handle, start=1):
            text = text.strip()
            if not text or text.startswith("#"):
                continue
            try:
                board = parse_position_line(text)
            except ValueError as error:
                on_bad(BadInput(f"{path}:{number}", f"{error}"))
                continue
            if not has_legal_move(board):
                on_bad(BadInput(f"{path}:{number}", f"{board.fen()} has no legal move"))
                continue
            yield board.fen()


def _csv_fens(path: Path, on_bad: OnBad) -> Iterator[str]:
    with open(path, encoding="utf-8", errors="replace", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or "fen" not in header:
            raise InputError(f"{path}:1: a CSV of positions needs a header with a 'fen' column, got {header!r}")
        column = header.index("fen")
        for row in reader:
            where = f"{path}:{reader.line_num}"
            if not row:
                continue
            if len(row) <= column:
                on_bad(BadInput(where, f"no fen field in {row!r}"))
                continue
            try:
                board = parse_position_line(row[column])
            except ValueError as error:
                on_bad(BadInput(where, f"{error}"))
                continue
            if has_legal_move(board):
                yield board.fen()
            else:
                on_bad(BadInput(where, f"{board.fen()} has no legal move"))


def _bullet_fens(path: Path, on_bad: OnBad) -> Iterator[str]:
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                fen, _, _ = parse_bullet_line(text)
                board = parse_position_line(fen)
            except ValueError as error:
                on_bad(BadInput(f"{path}:{number}", f"{error}"))
                continue
            if has_legal_move(board):
                yield board.fen()
            else:
                on_bad(BadInput(f"{path}:{number}", f"{board.fen()} has no legal move"))


def read_fens(path: str | os.PathLike, on_bad: OnBad) -> Iterator[str]:
    """Every position of ``path`` (kind by ``source_kind``) as a full FEN, in file order, repeats included."""
    readers = {"replay": _replay_fens, "pgn": _pgn_fens, "csv": _csv_fens, "epd": _line_fens, "bullet": _bullet_fens}
    kind = source_kind(path)
    if kind not in readers:
        raise InputError(f"{path}: a polyglot book holds openings, not positions to read")
    yield from readers[kind](Path(path), on_bad)


def unique_fens(fens: Iterable[str], limit: int | None = None) -> list[str]:
    """The first occurrence of each position (``position_key``), at most ``limit`` of them."""
    seen: set[str] = set()
    out: list[str] = []
    for fen in fens:
        if limit is not None and len(out) >= limit:
            break
        key = position_key(fen)
        if key not in seen:
            seen.add(key)
            out.append(fen)
    return out


class _Grouped(Protocol):
    groups: np.ndarray  # int64 [P]: the unit of the held-out split (a game, or a row)

    def subset(self: Data, rows: np.ndarray) -> Data: ...


Data = TypeVar("Data", bound=_Grouped)


def split_held_out(data: Data, fraction: float, seed: int) -> tuple[Data, Data | None]:
    """(train, held-out): a seeded ``fraction`` of the groups (games or rows) held out, at least one
    when there are two groups or more and never all of them; None when nothing is held out. Shared by
    ``pretrain`` and the NNUE data (anything with ``groups`` and ``subset(rows)``)."""
    if not 0.0 <= fraction < 1.0:
        raise InputError(f"--held-out must be in [0, 1), got {fraction}")
    groups = np.unique(data.groups)
    held_count = int(round(fraction * len(groups)))
    if fraction > 0 and len(groups) >= 2:
        held_count = max(held_count, 1)
    held_count = min(held_count, len(groups) - 1)  # something is left to train on
    held_groups = np.random.default_rng(seed).permutation(groups)[:held_count]
    held = np.isin(data.groups, held_groups)
    train = data.subset(np.flatnonzero(~held))
    return train, (data.subset(np.flatnonzero(held)) if held.any() else None)
