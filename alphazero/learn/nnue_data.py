"""NNUE training data: positions (or PQR triples) with their targets, as cached sparse feature rows.

Owns reading the sources an NNUE learns from, turning each position into its active feature indices
once (``alphazero.nets.features.batch_features``), and the feature cache that spares every later run
the FEN parsing. Knows nothing of torch or of the network.

Sources (``source_kind``: a directory is a run, ``.pgn`` is games, anything else a CSV):

- **labelled CSV** with a ``fen`` column and a score: ``score_cp`` (``alphazero label``) or ``cp_stm``
  / ``cp`` (``../shared/data/evals-dev.csv``), centipawns for the side to move; ``mate`` (moves to mate,
  signed for the side to move) gives +-inf; the ``wdl_win,wdl_draw,wdl_loss`` columns are used only
  when a row has neither (their expected score as ``400 * logit(p)``).
  A row with no score at all keeps NaN (the trainer drops rows without a target). FENs are read by
  the features' compiled parser (kings, piece and pawn counts, the en-passant square; the move
  counters may be missing), at a microsecond a row instead of python-chess's hundred. A ``result``
  column (``alphazero datagen``, a played ``label``: 1 / 0.5 / 0 for the side to move, empty unknown)
  is the game's result.
- **bullet text** (``FEN | score | result``, White's view, ``alphazero.learn.bullet_text``; found by its
  first line): score and result turned to the side to move's; a mate score is +-inf.
- **PGN** (``.pgn``): every position of every game that has a legal move; ``result`` the game's result
  for the side to move (NaN for ``*``), no score.
- **run directory** (or its ``replay/`` folder): every position of every self-play game, replayed from
  the PGN each shard keeps (``alphazero.learn.positions``). ``result`` is z, the game's result for the
  side to move (NaN for games stopped at the length cap: they have no result); ``score_cp`` is the
  root search value q of the positions the shard recorded (a full search; played-but-unrecorded
  positions have none), as ``800 * atanh(q)`` so that ``sigmoid(score / 400) = (q + 1) / 2``. An NNUE
  can so be trained with no engine at all. Recorded positions are found in the game by their packed
  planes (the ply byte first, then all 122 bytes), in order.

Mirroring (``mirror``, off by default): chess is symmetric under a left-right flip of the board except
for castling, so every position without castling rights is added a second time flipped (files a <-> h,
the en-passant square with them), with the same targets and in the same held-out group as the
original: twice the positions for the same labels. Positions with castling rights are not flipped.

PQR triples (the thesis's training method): P a position, Q the position after the move played (the
game's move; a CSV's ``best_uci``), R the position after a uniformly random other legal move (seeded);
positions with a single legal move (no R) and final positions are skipped.

Arrays (one row per position; the CSR layout ``torch.nn.EmbeddingBag`` takes):

    FeatureRows.stm_index    int32 [T]      active features, side to move's perspective, row after row
    FeatureRows.stm_offsets  int64 [P + 1]  row p owns stm_index[stm_offsets[p]:stm_offsets[p + 1]]
    FeatureRows.nstm_*                      the same from the opponent's perspective
    PositionData.score_cp    float32 [P]    centipawns for the side to move; NaN none, +-inf mate
    PositionData.result      float32 [P]    +1 / 0 / -1 for the side to move; NaN unknown
    *.groups                 int64 [P]      unit of the held-out split: the game (PGN, run), or a block of
                                            consecutive rows (CSV, bullet text; ``row_blocks``)

Cache: one uncompressed ``.npz`` per source file and feature set in a cache directory, named
``NAME-WHAT-KEY.npz`` where KEY hashes the source's absolute path, size and modification time (every
shard's, for a run), the canonical feature spec, ``DATA_FORMAT_VERSION``, whether mirrored and, for
PQR, the seed. A stale or damaged cache file is rebuilt, never trusted. Caches are written only once every source has parsed
(and the trainer has accepted the data: ``load_data`` hands back ``write_caches``).

A line that does not parse (a bad FEN, a wrong number of fields, a score that is not a number, an
illegal ``best_uci``, an unreadable PGN game or shard) raises ``InputError`` naming ``FILE:LINE``.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import math
import os
import time
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import chess
import numpy as np

from alphazero.board.game import RESULT_VALUES
from alphazero.errors import InputError
from alphazero.fileio import atomic_write, text_lines
from alphazero.learn import bullet_text
from alphazero.learn.bullet_text import looks_like_bullet
from alphazero.learn.positions import has_legal_move, position_and_move, raise_bad, read_pgn_games

# 2: positions carry a noisy flag (in check, or the move that follows takes or promotes); 3: and their
# number of men (``FeatureRows.pieces``, for output buckets); 4: a row file's groups are blocks of rows
DATA_FORMAT_VERSION = 4
# A row file's held-out unit: this many consecutive lines (fewer in a small file, ``row_blocks``).
# ``datagen`` and ``label`` write each game's rows together (about 90 of them at 5,000 nodes), so a block
# is about eleven whole games: rows held out one by one sat beside the next and the previous move of
# the same game in training, and that held-out loss rewarded nets that fit the training games more
# closely and then played worse (docs/RESULTS.md, 2026-12-07).
ROW_BLOCK = 1024
MIN_ROW_GROUPS = 1000
SCORE_COLUMNS = ("score_cp", "cp_stm", "cp")
CHUNK = 4096  # positions featurised per batch_features call (bounded memory)

Log = Callable[[str], None]


def _quiet(message: str) -> None:
    return None


# ---- feature rows -----------------------------------------------------------------------------


def _gather(index: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR rows ``rows`` of (index, offsets) as a new CSR pair, in the order given."""
    starts = offsets[rows]
    lengths = offsets[rows + 1] - starts
    new_offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    positions = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(new_offsets[-1], dtype=np.int64)
    return index[positions], new_offsets


def _concat_csr(parts: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    indices = [index for index, _ in parts]
    offsets = [np.zeros(1, dtype=np.int64)]
    base = 0
    for index, part_offsets in parts:
        offsets.append(part_offsets[1:].astype(np.int64) + base)
        base += len(index)
    return (np.concatenate(indices).astype(np.int32) if indices else np.zeros(0, dtype=np.int32),
            np.concatenate(offsets))


@dataclass
class FeatureRows:
    """Both perspectives' active features of P positions (CSR, module docstring), and how many men
    each position has (kings included: what picks a net's output bucket)."""

    stm_index: np.ndarray  # int32 [T]
    stm_offsets: np.ndarray  # int64 [P + 1]
    nstm_index: np.ndarray  # int32 [T']
    nstm_offsets: np.ndarray  # int64 [P + 1]
    pieces: np.ndarray  # uint8 [P]

    @property
    def num_positions(self) -> int:
        return int(self.stm_offsets.shape[0] - 1)

    def take(self, rows: np.ndarray) -> "FeatureRows":
        stm = _gather(self.stm_index, self.stm_offsets, rows)
        nstm = _gather(self.nstm_index, self.nstm_offsets, rows)
        return FeatureRows(stm[0], stm[1], nstm[0], nstm[1], self.pieces[rows])

    @staticmethod
    def concat(parts: Sequence["FeatureRows"]) -> "FeatureRows":
        stm = _concat_csr([(p.stm_index, p.stm_offsets) for p in parts])
        nstm = _concat_csr([(p.nstm_index, p.nstm_offsets) for p in parts])
        pieces = np.concatenate([p.pieces for p in parts]) if parts else np.zeros(0, np.uint8)
        return FeatureRows(stm[0], stm[1], nstm[0], nstm[1], pieces)

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}stm_index": self.stm_index, f"{prefix}stm_offsets": self.stm_offsets,
                f"{prefix}nstm_index": self.nstm_index, f"{prefix}nstm_offsets": self.nstm_offsets,
                f"{prefix}pieces": self.pieces}

    @staticmethod
    def from_arrays(arrays: dict[str, np.ndarray], prefix: str) -> "FeatureRows":
        return FeatureRows(arrays[f"{prefix}stm_index"].astype(np.int32, copy=False),
                           arrays[f"{prefix}stm_offsets"].astype(np.int64, copy=False),
                           arrays[f"{prefix}nstm_index"].astype(np.int32, copy=False),
                           arrays[f"{prefix}nstm_offsets"].astype(np.int64, copy=False),
                           arrays[f"{prefix}pieces"].astype(np.uint8, copy=False))


def count_pieces(board: chess.Board | str) -> int:
    """The men on the board, kings included (a FEN's piece letters)."""
    if isinstance(board, chess.Board):
        return chess.popcount(board.occupied)
    placement = board.split(" ", 1)[0]
    return sum(1 for char in placement if char.isalpha())


def featurise(boards: Sequence[chess.Board | str], feature_set: Any) -> FeatureRows:
    """Active features of ``boards`` (boards or FENs; ``alphazero.nets.features.batch_features``), CHUNK
    at a time; ``InputError`` for a FEN that does not parse."""
    from alphazero.nets.features import batch_features

    parts = []
    for start in range(0, len(boards), CHUNK):
        chunk = list(boards[start:start + CHUNK])
        batch = batch_features(chunk, feature_set)
        parts.append(FeatureRows(np.asarray(batch.stm_index, dtype=np.int32), np.asarray(batch.stm_offsets, dtype=np.int64),
                                 np.asarray(batch.nstm_index, dtype=np.int32), np.asarray(batch.nstm_offsets, dtype=np.int64),
                                 np.array([count_pieces(board) for board in chunk], dtype=np.uint8)))
    if not parts:
        empty = np.zeros(0, dtype=np.int32)
        return FeatureRows(empty, np.zeros(1, dtype=np.int64), empty.copy(), np.zeros(1, dtype=np.int64),
                           np.zeros(0, dtype=np.uint8))
    return parts[0] if len(parts) == 1 else FeatureRows.concat(parts)


# ---- data sets --------------------------------------------------------------------------------


@dataclass
class PositionData:
    """Positions with a score and a result for the side to move (module docstring)."""

    features: FeatureRows
    score_cp: np.ndarray  # float32 [P]: NaN none, +-inf mate
    result: np.ndarray  # float32 [P]: +1 / 0 / -1, NaN unknown
    groups: np.ndarray  # int64 [P]
    # bool [P]: not a quiet position (side to move in check, or the best / played move captures or
    # promotes): its score is about a tactic, which the search resolves, not the static evaluation.
    noisy: np.ndarray
    kind: str = "csv"

    @property
    def num_positions(self) -> int:
        return int(self.groups.shape[0])

    def subset(self, rows: np.ndarray) -> "PositionData":
        return PositionData(self.features.take(rows), self.score_cp[rows], self.result[rows], self.groups[rows],
                            self.noisy[rows], self.kind)

    def arrays(self) -> dict[str, np.ndarray]:
        return {**self.features.arrays(""), "score_cp": self.score_cp, "result": self.result, "groups": self.groups,
                "noisy": self.noisy}

    @staticmethod
    def from_arrays(arrays: dict[str, np.ndarray], kind: str) -> "PositionData":
        return PositionData(FeatureRows.from_arrays(arrays, ""), arrays["score_cp"].astype(np.float32, copy=False),
                            arrays["result"].astype(np.float32, copy=False), arrays["groups"].astype(np.int64, copy=False),
                            arrays["noisy"].astype(bool, copy=False), kind)


@dataclass
class PQRData:
    """(parent, observed child, random child) triples; each position's features from its own side to move."""

    p: FeatureRows
    q: FeatureRows
    r: FeatureRows
    groups: np.ndarray  # int64 [N]
    kind: str = "pgn"

    @property
    def num_positions(self) -> int:
        return int(self.groups.shape[0])

    def subset(self, rows: np.ndarray) -> "PQRData":
        return PQRData(self.p.take(rows), self.q.take(rows), self.r.take(rows), self.groups[rows], self.kind)

    def arrays(self) -> dict[str, np.ndarray]:
        return {**self.p.arrays("p_"), **self.q.arrays("q_"), **self.r.arrays("r_"), "groups": self.groups}

    @staticmethod
    def from_arrays(arrays: dict[str, np.ndarray], kind: str) -> "PQRData":
        return PQRData(FeatureRows.from_arrays(arrays, "p_"), FeatureRows.from_arrays(arrays, "q_"),
                       FeatureRows.from_arrays(arrays, "r_"), arrays["groups"].astype(np.int64, copy=False), kind)


Dataset = PositionData | PQRData


def concat_data(parts: Sequence[Dataset]) -> Dataset:
    """Several sources as one data set; groups renumbered so that no two sources share one."""
    if len(parts) == 1:
        return parts[0]
    groups, base = [], 0
    for part in parts:
        _, inverse = np.unique(part.groups, return_inverse=True)
        groups.append(inverse.astype(np.int64) + base)
        base += int(inverse.max()) + 1 if len(inverse) else 0
    kinds = sorted({part.kind for part in parts})
    kind = kinds[0] if len(kinds) == 1 else "+".join(kinds)
    if all(isinstance(part, PositionData) for part in parts):
        positions = [part for part in parts if isinstance(part, PositionData)]
        return PositionData(FeatureRows.concat([p.features for p in positions]),
                            np.concatenate([p.score_cp for p in positions]), np.concatenate([p.result for p in positions]),
                            np.concatenate(groups), np.concatenate([p.noisy for p in positions]), kind)
    triples = [part for part in parts if isinstance(part, PQRData)]
    if len(triples) != len(parts):
        raise ValueError("cannot mix positions and PQR triples")
    return PQRData(FeatureRows.concat([t.p for t in triples]), FeatureRows.concat([t.q for t in triples]),
                   FeatureRows.concat([t.r for t in triples]), np.concatenate(groups), kind)


# ---- sources ----------------------------------------------------------------------------------


def source_kind(path: str | os.PathLike) -> str:
    """``replay`` (a directory), ``pgn`` (``.pgn``), ``bullet`` (a file whose first line is bullet's) or
    ``csv`` (any other file)."""
    path = Path(path)
    if path.is_dir():
        return "replay"
    if not path.is_file():
        raise InputError(f"{path}: no such file or directory")
    if path.suffix.lower() == ".pgn":
        return "pgn"
    return "bullet" if path.suffix.lower() != ".csv" and looks_like_bullet(path) else "csv"


def q_to_cp(q: float) -> float:
    """A value in [-1, 1] for the side to move -> centipawns with ``sigmoid(cp / 400) = (q + 1) / 2``."""
    if q >= 1.0:
        return math.inf
    if q <= -1.0:
        return -math.inf
    return 800.0 * math.atanh(q)


def _probability_to_cp(p: float) -> float:
    if p >= 1.0:
        return math.inf
    if p <= 0.0:
        return -math.inf
    return 400.0 * math.log(p / (1.0 - p))


def _row_score(row: list[str], column: dict[str, int], where: str) -> float:
    """The side to move's score of one CSV row in centipawns (module docstring); NaN when it has none."""

    def field_text(name: str) -> str:
        return row[column[name]].strip() if name in column else ""

    try:
        for name in SCORE_COLUMNS:
            if field_text(name):
                value = float(field_text(name))
                if math.isnan(value):
                    raise ValueError(f"{name} is NaN")
                return value
        if field_text("mate"):
            return math.inf if int(field_text("mate")) > 0 else -math.inf
        wdl = [field_text(name) for name in ("wdl_win", "wdl_draw", "wdl_loss")]
        if all(wdl):
            win, draw, loss = (int(text) for text in wdl)
            if min(win, draw, loss) < 0 or win + draw + loss <= 0:
                raise ValueError(f"WDL {win}/{draw}/{loss} is not a distribution")
            return _probability_to_cp((win + 0.5 * draw) / (win + draw + loss))
    except ValueError as error:
        raise InputError(f"{where}: bad score ({error})") from None
    return math.nan


def _row_result(row: list[str], column: dict[str, int], where: str) -> float:
    """The ``result`` column (1 / 0.5 / 0 for the side to move) as +1 / 0 / -1; NaN when absent or empty."""
    text = row[column["result"]].strip() if "result" in column else ""
    if not text:
        return math.nan
    if text not in ("1", "0.5", "0", "1.0", "0.0"):
        raise InputError(f"{where}: bad result {text!r} (1, 0.5 or 0 for the side to move)")
    return 2.0 * float(text) - 1.0


def _read_bullet(path: Path, collected: _Collected, pqr: _PQRPicker | None) -> None:
    if pqr is not None:
        raise InputError(f"{path}: PQR triples need the move played, which bullet's text format does not hold")
    with contextlib.closing(text_lines(path, "bullet text")) as lines:
        for number, text in enumerate(lines, start=1):
            if not text.strip():
                continue
            where = f"{path}:{number}"
            try:
                fen, white_cp, white_result = bullet_text.parse_line(text)
            except ValueError as error:
                raise InputError(f"{where}: {error}") from None
            sign = 1.0 if fen.split()[1:2] == ["w"] else -1.0
            result = 2.0 * white_result - 1.0
            # In-check positions count as noisy; bullet's format has no best move to say more.
            collected.add((fen,), number, where, score_cp=sign * white_cp, result=sign * result,
                          noisy=_noisy_fen(fen, ""))


def mirror_fen(fen: str) -> str | None:
    """The FEN flipped left-right (files a <-> h), or None when a side may still castle (the flip has
    no castling equivalent) or the text is not a FEN's shape (the original's parse then names it)."""
    fields = fen.split()
    if len(fields) < 4 or fields[2] != "-":
        return None
    ranks = fields[0].split("/")
    if len(ranks) != 8:
        return None
    flipped = ["".join(reversed(rank)) for rank in ranks]
    ep = fields[3]
    if ep != "-":
        if len(ep) != 2 or ep[0] not in "abcdefgh":
            return None
        ep = chr(ord("a") + ord("h") - ord(ep[0])) + ep[1]
    return " ".join(["/".join(flipped), fields[1], "-", ep, *fields[4:]])


def _mirrored(position: chess.Board | str) -> chess.Board | str | None:
    if isinstance(position, str):
        return mirror_fen(position)
    if position.castling_rights:
        return None
    return position.transform(chess.flip_horizontal)


class _Collected:
    """What a reader collects: targets as lists, positions (boards or FEN strings) featurised CHUNK at a
    time (python-chess boards are ~1 KB each; millions of them must not sit in memory). ``mirror``: a
    position without castling rights is added again flipped left-right (module docstring)."""

    def __init__(self, feature_set: Any, pqr: bool, mirror: bool = False) -> None:
        self.feature_set = feature_set
        self.pqr = pqr
        self.mirror = mirror and not pqr
        self.pending: tuple[list[chess.Board | str], ...] = ([], [], []) if pqr else ([],)  # P (, Q, R)
        self.wheres: list[str] = []  # FILE:LINE of each pending position, for a FEN the parser refuses
        self.parts: tuple[list[FeatureRows], ...] = ([], [], []) if pqr else ([],)
        self.score_cp: list[float] = []
        self.result: list[float] = []
        self.noisy: list[bool] = []
        self.groups: list[int] = []

    def add(self, positions: Sequence[chess.Board | str], group: int, where: str = "",
            score_cp: float = math.nan, result: float = math.nan, noisy: bool = False) -> None:
        copies = [(positions, where)]
        flipped = _mirrored(positions[0]) if self.mirror else None
        if flipped is not None:
            copies.append(((flipped,), f"{where} (mirrored)" if where else ""))
        for copy, copy_where in copies:
            for pending, position in zip(self.pending, copy):
                pending.append(position)
            self.wheres.append(copy_where)
            self.groups.append(group)
            if not self.pqr:
                self.score_cp.append(score_cp)
                self.result.append(result)
                self.noisy.append(noisy)
        if len(self.pending[0]) >= CHUNK:
            self.flush()

    def flush(self) -> None:
        for pending, parts in zip(self.pending, self.parts):
            if pending:
                try:
                    parts.append(featurise(pending, self.feature_set))
                except InputError:
                    self._name_bad(pending)
                    raise
                pending.clear()
        self.wheres.clear()

    def _name_bad(self, pending: Sequence[chess.Board | str]) -> None:
        """Raise an ``InputError`` naming the line of the first position the feature parser refuses."""
        for position, where in zip(pending, self.wheres):
            try:
                featurise([position], self.feature_set)
            except InputError as error:
                raise InputError(f"{where}: {error}" if where else str(error)) from None

    def rows(self) -> list[FeatureRows]:
        self.flush()
        return [parts[0] if len(parts) == 1 else FeatureRows.concat(parts) for parts in self.parts]


class _PQRPicker:
    """Adds (P, Q, R) for a position and the move played: R after a seeded uniformly random other move."""

    def __init__(self, collected: _Collected, seed: int) -> None:
        self.collected = collected
        self.rng = np.random.default_rng(seed)

    def add(self, board: chess.Board, move: chess.Move, group: int) -> None:
        others = [m for m in board.legal_moves if m != move]
        if not others:
            return  # a single legal move: no R
        other = others[int(self.rng.integers(len(others)))]
        child, random_child = board.copy(stack=False), board.copy(stack=False)
        child.push(move)
        random_child.push(other)
        self.collected.add((board.copy(stack=False), child, random_child), group)


def _read_csv(path: Path, collected: _Collected, pqr: _PQRPicker | None) -> None:
    with contextlib.closing(text_lines(path, "training CSV")) as lines:
        reader = csv.reader(lines)
        try:
            header = next(reader, None)
        except csv.Error as error:
            raise InputError(f"{path}:1: {error}") from None
        if header is None or "fen" not in header:
            raise InputError(f"{path}:1: an NNUE training CSV needs a header with a 'fen' column, got {header!r}")
        column = {name.strip(): index for index, name in enumerate(header)}
        if pqr is not None and "best_uci" not in column:
            raise InputError(f"{path}:1: PQR triples from a CSV need a 'best_uci' column (the move that makes Q)")
        if pqr is None and not any(name in column for name in (*SCORE_COLUMNS, "mate", "wdl_win")):
            raise InputError(f"{path}:1: no score column (one of {', '.join(SCORE_COLUMNS)}, mate, wdl_win/draw/loss)")
        while True:
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as error:
                raise InputError(f"{path}:{reader.line_num}: {error}") from None
            where = f"{path}:{reader.line_num}"
            if not row:
                continue
            if len(row) != len(header):
                raise InputError(f"{where}: {len(row)} fields, expected {len(header)} ({','.join(header)})")
            fen = row[column["fen"]].strip()
            if pqr is None:
                # The compiled parser reads the FEN (python-chess would cost ~100x more per row); a FEN it
                # refuses is named by _Collected with this line.
                best = row[column["best_uci"]].strip() if "best_uci" in column else ""
                collected.add((fen,), reader.line_num, where, score_cp=_row_score(row, column, where),
                              result=_row_result(row, column, where), noisy=_noisy_fen(fen, best))
                continue
            board, move = position_and_move(fen, row[column["best_uci"]], where)
            pqr.add(board, move, reader.line_num)


def is_noisy(board: chess.Board, move: chess.Move | None) -> bool:
    """Not a quiet position: the side to move is in check, or ``move`` (the best or the played move)
    captures or promotes (nnue-pytorch's "smart FEN skipping" leaves these out of training)."""
    return board.is_check() or (move is not None and (board.is_capture(move) or move.promotion is not None))


def _noisy_fen(fen: str, best_uci: str) -> bool:
    """``is_noisy`` for a CSV row; a FEN python-chess cannot read counts as quiet here (the feature
    parser names the line)."""
    try:
        board = chess.Board(fen)
    except ValueError:
        return False
    try:
        move = chess.Move.from_uci(best_uci) if best_uci else None
    except ValueError:
        move = None
    return is_noisy(board, move)


def _read_pgn(path: Path, collected: _Collected, pqr: _PQRPicker | None) -> None:
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, (_, game) in enumerate(read_pgn_games(handle, str(path), raise_bad)):
            white_value = RESULT_VALUES.get(game.headers.get("Result", "*"), math.nan)
            board = game.board()
            for move in game.mainline_moves():
                if pqr is not None:
                    pqr.add(board, move, number)
                else:
                    _add_position(collected, board, white_value, math.nan, number, move)
                board.push(move)
            if pqr is None and has_legal_move(board):
                _add_position(collected, board, white_value, math.nan, number)


def _add_position(collected: _Collected, board: chess.Board, white_value: float, score_cp: float, group: int,
                  move: chess.Move | None = None) -> None:
    result = white_value if board.turn == chess.WHITE else -white_value
    collected.add((board.copy(stack=False),), group, score_cp=score_cp, result=result, noisy=is_noisy(board, move))


def _replay_games(path: Path) -> Iterator[tuple[str, Any, int, Any]]:
    """``(where, shard, game number, first row)`` of every game of every shard of a run."""
    from alphazero.learn.replay import read_shard, shard_paths

    replay_dir = path / "replay" if (path / "replay").is_dir() else path
    paths = shard_paths(replay_dir)
    if not paths:
        raise InputError(f"{path}: no replay shards (expected a run directory or its replay/ folder)")
    for shard_path in paths:
        shard = read_shard(shard_path)  # InputError naming the shard when it is damaged
        starts = np.concatenate(([0], np.cumsum(shard.game_positions)))
        for number in range(shard.num_games):
            yield f"{shard_path} (game {number})", shard, number, int(starts[number])


def _read_replay(path: Path, collected: _Collected, pqr: _PQRPicker | None) -> None:
    from alphazero.board.encoding import encode_packed
    from alphazero.board.game import MAX_LENGTH

    group = 0
    for where, shard, number, first in _replay_games(path):
        games = list(read_pgn_games(io.StringIO(shard.pgns[number]), where, raise_bad))
        if len(games) != 1:
            raise InputError(f"{where}: expected one PGN game, found {len(games)}")
        game = games[0][1]
        finished = shard.terminations[number] != MAX_LENGTH
        white_value = RESULT_VALUES.get(shard.results[number], math.nan) if finished else math.nan
        recorded = shard.planes[first:first + int(shard.game_positions[number])]  # uint8 [n, 122]
        values = shard.root_values[first:first + len(recorded)]
        next_row = 0
        board = game.board()
        moves = list(game.mainline_moves())
        for ply in range(len(moves) + 1):
            if ply == len(moves) and not has_legal_move(board):
                break
            score = math.nan
            # The ply byte (the last packed byte) rules out almost every unrecorded position cheaply.
            if next_row < len(recorded) and recorded[next_row, -1] == min(board.ply(), 255):
                if np.array_equal(encode_packed([board])[0], recorded[next_row]):
                    score = q_to_cp(float(values[next_row]))
                    next_row += 1
            if ply < len(moves):
                if pqr is not None:
                    pqr.add(board, moves[ply], group)
                else:
                    _add_position(collected, board, white_value, score, group, moves[ply])
                board.push(moves[ply])
            elif pqr is None:
                _add_position(collected, board, white_value, score, group)
        if next_row != len(recorded):
            raise InputError(f"{where}: {len(recorded) - next_row} of the shard's {len(recorded)} recorded positions "
                             "are not in the game's PGN")
        group += 1


def read_source(path: str | os.PathLike, feature_set: Any, what: str = "positions", seed: int = 0,
                mirror: bool = False) -> Dataset:
    """``path`` (any source, module docstring) as feature rows: ``what`` is ``positions`` or ``pqr``;
    ``mirror`` adds the flipped positions (module docstring). Slow (python-chess parses every
    position): ``load_data`` caches the result."""
    path = Path(path)
    kind = source_kind(path)
    collected = _Collected(feature_set, pqr=what == "pqr", mirror=mirror)
    pqr = _PQRPicker(collected, seed) if what == "pqr" else None
    readers = {"csv": _read_csv, "pgn": _read_pgn, "replay": _read_replay, "bullet": _read_bullet}
    readers[kind](path, collected, pqr)
    if not collected.groups:
        raise InputError(f"{path}: no {'PQR triples' if pqr else 'positions'} to train on")
    groups = np.array(collected.groups, dtype=np.int64)
    if kind in ("csv", "bullet"):
        groups = row_blocks(groups)
    rows = collected.rows()
    if pqr is not None:
        return PQRData(rows[0], rows[1], rows[2], groups, kind)
    return PositionData(rows[0], np.array(collected.score_cp, dtype=np.float32),
                        np.array(collected.result, dtype=np.float32), groups, np.array(collected.noisy, dtype=bool), kind)


def row_blocks(lines: np.ndarray) -> np.ndarray:
    """A row file's held-out groups from its rows' line numbers: runs of ``ROW_BLOCK`` consecutive lines,
    shorter in a file of fewer than ``MIN_ROW_GROUPS`` such runs so that it still splits finely (one line
    a group below ``MIN_ROW_GROUPS`` lines). A mirrored copy keeps its original's line, so its group."""
    block = max(1, min(ROW_BLOCK, int(lines.max()) // MIN_ROW_GROUPS)) if len(lines) else 1
    return lines // block


# ---- cache ------------------------------------------------------------------------------------


def source_key(path: str | os.PathLike, spec: str, what: str, seed: int, mirror: bool = False) -> str:
    """The cache key of a source (module docstring): a hex digest."""
    path = Path(path).resolve()
    if path.is_dir():
        replay = path / "replay" if (path / "replay").is_dir() else path
        stamp: Any = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in replay.glob("shard-*.npz"))
    else:
        stat = path.stat()
        stamp = [stat.st_size, stat.st_mtime_ns]
    key = {"path": str(path), "stamp": stamp, "features": spec, "what": what, "version": DATA_FORMAT_VERSION,
           "seed": seed if what == "pqr" else None, "mirror": mirror and what != "pqr"}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()[:20]


def cache_path(cache_dir: str | os.PathLike, path: str | os.PathLike, spec: str, what: str, seed: int,
               mirror: bool = False) -> Path:
    name = Path(path).resolve().name or "data"
    return Path(cache_dir) / f"{name}-{what}-{source_key(path, spec, what, seed, mirror)}.npz"


def _read_cache(file: Path, kind: str, what: str) -> Dataset | None:
    try:
        with np.load(file, allow_pickle=False) as loaded:
            arrays = {name: loaded[name] for name in loaded.files}
        meta = json.loads(str(arrays.pop("meta")))
        if meta.get("version") != DATA_FORMAT_VERSION or meta.get("what") != what:
            return None
        return PQRData.from_arrays(arrays, kind) if what == "pqr" else PositionData.from_arrays(arrays, kind)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError, zlib.error, json.JSONDecodeError):
        return None


def _write_cache(file: Path, data: Dataset, what: str, source: str) -> None:
    arrays = dict(data.arrays(), meta=np.array(json.dumps({"version": DATA_FORMAT_VERSION, "what": what, "source": source})))
    # numpy's stub checks **arrays against savez's allow_pickle keyword
    atomic_write(file, lambda handle: np.savez(handle, **arrays))  # type: ignore[arg-type]


def load_data(paths: Sequence[str | os.PathLike], feature_set: Any, cache_dir: str | os.PathLike | None,
              what: str = "positions", seed: int = 0, log: Log | None = None,
              mirror: bool = False) -> tuple[Dataset, list[dict[str, Any]], Callable[[], None]]:
    """Every source in ``paths`` as one data set, from the cache where it is current. Returns the data, one
    record per source (path, kind, rows, cached, its cache key) and ``write_caches()``, which writes the
    cache files of the sources that were parsed: the caller runs it once it has accepted the data, so a
    bad line anywhere (or data the caller refuses) leaves nothing behind. ``cache_dir`` None: no cache."""
    log = log or _quiet
    spec = feature_set.spec
    parts: list[Dataset] = []
    sources: list[dict[str, Any]] = []
    pending: list[tuple[Path, Dataset, str]] = []
    for path in paths:
        kind = source_kind(path)
        file = cache_path(cache_dir, path, spec, what, seed, mirror) if cache_dir is not None else None
        data = _read_cache(file, kind, what) if file is not None and file.is_file() else None
        cached = data is not None
        if data is None:
            started = time.perf_counter()
            log(f"nnue data: reading {path} ({kind}, {what}, features {spec})")
            data = read_source(path, feature_set, what, seed, mirror)
            log(f"nnue data: {data.num_positions} {'triples' if what == 'pqr' else 'positions'} from {path} "
                f"in {time.perf_counter() - started:.1f} s")
            if file is not None:
                pending.append((file, data, str(path)))
        parts.append(data)
        sources.append({"path": str(path), "kind": kind, "rows": data.num_positions, "cached": cached,
                        "key": source_key(path, spec, what, seed, mirror)})

    def write_caches() -> None:
        for file, part, source in pending:
            _write_cache(file, part, what, source)

    return concat_data(parts), sources, write_caches
