"""The ``alphazero puzzles`` command's work: the share of only-move puzzles a player solves.

Reads a CSV of puzzles (``fen``, ``best_uci``), asks the player for all of them in batches, and
reports the share solved with its 95% Wilson interval (``alphazero.judge.elo.wilson_interval``). A
malformed row raises ``InputError`` naming the file and the row.
"""

from __future__ import annotations

import contextlib
import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import chess

from alphazero.board.encoding import board_from_fen
from alphazero.board.game import legal_move
from alphazero.errors import InputError
from alphazero.fileio import input_file, text_lines
from alphazero.judge.elo import wilson_interval
from alphazero.judge.players import Player, make_player


@dataclass(frozen=True)
class Puzzle:
    row: int  # 1-based data row of the CSV (the header is line 1, so this is line row + 1)
    board: chess.Board
    best: chess.Move


def load_puzzles(path: str | Path, limit: int | None = None) -> list[Puzzle]:
    """Read only-move puzzles from a CSV with a header and at least columns ``fen`` and ``best_uci``.

    A bad FEN, an illegal position or a ``best_uci`` that is not a legal move raises ``InputError``
    naming the file and the row.
    """
    path = input_file(path, "puzzle file")
    with contextlib.closing(text_lines(path, "puzzle file")) as lines:
        reader = csv.DictReader(lines)
        columns = reader.fieldnames or []
        if "fen" not in columns or "best_uci" not in columns:
            raise InputError(f"{path}: needs a header with columns fen,best_uci (found: {','.join(columns) or 'nothing'})")
        puzzles: list[Puzzle] = []
        for row, record in enumerate(reader, start=1):
            if limit is not None and len(puzzles) >= limit:
                break
            where = f"{path}: row {row} (line {reader.line_num})"
            fen, best = (record.get("fen") or "").strip(), (record.get("best_uci") or "").strip()
            try:
                board = board_from_fen(fen)
            except ValueError as error:
                raise InputError(f"{where}: bad FEN: {error}") from None
            try:
                move = legal_move(board, best, "best_uci")
            except ValueError as error:
                raise InputError(f"{where}: {error}") from None
            puzzles.append(Puzzle(row, board, move))
    if not puzzles:
        raise InputError(f"{path}: no puzzles")
    return puzzles


def score_puzzles(player: Player, puzzles: Sequence[Puzzle], batch_size: int = 256) -> dict[str, Any]:
    """Share of puzzles where ``player`` picks ``best``, with its 95% Wilson interval; batched moves."""
    solved_rows: list[int] = []
    missed_rows: list[int] = []
    for start in range(0, len(puzzles), batch_size):
        batch = puzzles[start:start + batch_size]
        moves = player.choose_moves([puzzle.board for puzzle in batch])
        for puzzle, move in zip(batch, moves):
            (solved_rows if move == puzzle.best else missed_rows).append(puzzle.row)
    total = len(puzzles)
    low, high = wilson_interval(len(solved_rows), total)
    return {"player": player.name, "solved": len(solved_rows), "total": total,
            "share": len(solved_rows) / total, "low": low, "high": high, "missed_rows": missed_rows}


def run_puzzles(path: str | Path, spec: str, limit: int | None = None, seed: int = 0) -> dict[str, Any]:
    """Load the puzzles (``limit`` first rows), build the player and score it."""
    if limit is not None and limit < 1:
        raise InputError(f"--limit must be positive, got {limit}")
    puzzles = load_puzzles(path, limit)
    player = make_player(spec, seed=seed)
    try:
        report = score_puzzles(player, puzzles)
    finally:
        player.close()
    report["file"] = str(path)
    return report


def format_puzzle_report(report: dict[str, Any]) -> str:
    return (f"{report['player']}: solved {report['solved']}/{report['total']} = {100 * report['share']:.1f}% "
            f"[{100 * report['low']:.1f}%, {100 * report['high']:.1f}%] (95% Wilson interval)")
