"""NNUE feature sets: the compiled extraction against the python-chess reference, block by block.

The reference (``reference_features``) follows the definitions in ``alphazero.nets.features``'s
docstring literally; the hand-checked indices below pin the reference itself to those definitions.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

import chess
import numpy as np
import pytest

from alphazero.board.position import Position
from alphazero.errors import InputError
from alphazero.nets.features import (
    BLOCK_MAX_ACTIVE,
    BLOCK_NAMES,
    BLOCK_SIZES,
    MC_OFFSETS,
    active_features,
    batch_features,
    parse_features,
    reference_features,
)

EVALS_DEV = Path("/work/shared/data/evals-dev.csv")
EVERYTHING = "all+h+v+d1+d2+ph+pv+mb+mc"

HAND_MADE = [
    chess.STARTING_FEN,
    "r3k2r/pppq1ppp/2n2n2/3pp3/1b1PP1b1/2N2N2/PPPQ1PPP/R3K2R w KQkq - 0 8",  # castling rights both sides
    "rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3",  # en passant for White
    "rnbqkbnr/pppp1ppp/8/8/3Pp3/8/PPP1PPPP/RNBQKBNR b KQkq d3 0 3",  # en passant for Black, Black to move
    "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 1",  # ep square nobody can take
    "8/8/8/KPp4r/8/8/8/7k w - c6 0 2",  # en passant pseudo-legal only (pinned along the rank)
    "8/1P4k1/8/8/8/8/5Kp1/7R b - - 0 1",  # promotions pending for both, Black to move
    "r1b1k2r/1P3ppp/8/8/8/8/p4PPP/R3K2R w KQkq - 0 1",  # promotion by capture onto a rook
    "R6R/3Q4/1Q4Q1/4Q3/2Q4Q/Q4Q2/pp1Q4/kBNN1KB1 w - - 0 1",  # 218 legal moves: the mobility bound
    "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1",
    "4k3/8/8/8/8/8/3PK3/8 b - - 0 1",
]


def _positions() -> list[chess.Board]:
    boards = [chess.Board(fen) for fen in HAND_MADE]
    if EVALS_DEV.exists():
        with EVALS_DEV.open(newline="") as handle:
            rows = csv.DictReader(handle)
            boards += [chess.Board(row["fen"]) for _, row in zip(range(120), rows)]
    rng = random.Random(10)
    for _ in range(12):
        board = chess.Board()
        for ply in range(rng.randrange(20, 160)):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
            if ply % 9 == 4:
                boards.append(board.copy())
    return boards


POSITIONS = _positions()


def _compiled(board: chess.Board, spec: str) -> tuple[list[int], list[int]]:
    fs = parse_features(spec)
    position = Position.from_board(board)
    out = np.full(fs.max_active, -1, np.int32)
    result = []
    for perspective in (0, 1):
        n = active_features(position.bb, position.sq, position.st, fs.block_ids, fs.block_offsets, perspective, out)
        assert n <= fs.max_active
        result.append([int(i) for i in out[:n]])
    return result[0], result[1]


@pytest.mark.parametrize("spec", list(BLOCK_NAMES) + [EVERYTHING, "mc+pv+ka"])
def test_compiled_matches_reference(spec):
    fs = parse_features(spec)
    for board in POSITIONS:
        expected = reference_features(board, fs)
        assert _compiled(board, spec) == expected, (spec, board.fen())
        for indices in expected:
            assert all(0 <= i < fs.size for i in indices)
            assert len(indices) <= fs.max_active


def test_batch_matches_reference_from_fens_and_boards():
    fs = parse_features(EVERYTHING + "+ka")
    fens = [board.fen(en_passant="fen") for board in POSITIONS]
    batch = batch_features(fens, fs, chunk=7)  # several compiled calls
    from_boards = batch_features(POSITIONS, fs)
    assert len(batch) == len(POSITIONS)
    assert batch.stm_index.dtype == np.int32 and batch.stm_offsets.dtype == np.int64
    for name in ("stm_index", "stm_offsets", "nstm_index", "nstm_offsets"):
        assert np.array_equal(getattr(batch, name), getattr(from_boards, name)), name
    for i, board in enumerate(POSITIONS):
        stm, nstm = batch.position(i)
        assert (stm.tolist(), nstm.tolist()) == reference_features(board, fs), board.fen()
    assert len(batch_features([], fs)) == 0
    short = ["4k3/8/8/8/8/8/4P3/4K3", "4k3/8/8/8/8/8/4P3/4K3 b", "rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6"]
    batch = batch_features(short, fs)  # FEN fields python-chess lets one leave out
    for i, fen in enumerate(short):
        assert tuple(part.tolist() for part in batch.position(i)) == reference_features(chess.Board(fen), fs), fen


@pytest.mark.parametrize("spec", [EVERYTHING, "ka", "all+kb"])
def test_mirror_with_colours_swapped_has_the_same_features(spec):
    fs = parse_features(spec)
    for board in POSITIONS[:60]:
        mirror = board.mirror()
        assert reference_features(mirror, fs) == reference_features(board, fs), board.fen()
        assert _compiled(mirror, spec) == _compiled(board, spec), board.fen()


def test_hand_checked_indices_kings_and_a_pawn():
    # White: Ke1, Pe2; Black: Ke8; White to move. k = 6 * relative colour + role.
    board = chess.Board("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1")
    # Black's view mirrors the board: e8 -> rel e1 (4), e1 -> rel e8 (60), e2 -> rel e7 (52).
    expected = {
        "all": ([12, 5 * 64 + 4, 11 * 64 + 60], [5 * 64 + 4, 6 * 64 + 52, 11 * 64 + 60]),
        "ka": ([768 * 4 + 12, 768 * 4 + 324, 768 * 4 + 764], [768 * 4 + 324, 768 * 4 + 436, 768 * 4 + 764]),
        # Both kings on their relative e1: kb's centre bucket (1).
        "kb": ([768 + 12, 768 + 324, 768 + 764], [768 + 324, 768 + 436, 768 + 764]),
        "h": ([0 + 4, 40 + 4, 88 + 4], [40 + 4, 48 + 4, 88 + 4]),
        "v": ([0 + 1, 40 + 0, 88 + 7], [40 + 0, 48 + 6, 88 + 7]),
        "d1": ([0 + 4 - 1 + 7, 75 + 4 - 0 + 7, 165 + 4 - 7 + 7], [75 + 11, 90 + 4 - 6 + 7, 165 + 4]),
        "d2": ([0 + 5, 75 + 4, 165 + 11], [75 + 4, 90 + 10, 165 + 11]),
        "ph": ([], []),
        "pv": ([144 * 4 + 12 * 5 + 0], [144 * 4 + 12 * 6 + 11]),  # king below pawn; mirrored: pawn below king
        # White: pawn e3 e4 (2 moves), king d1 f1 d2 f2 (4); Black: king d8 f8 d7 e7 f7 (5). From Black's
        # view those squares mirror: the pawn's e3/e4 become e6/e5 (44, 36), d8 becomes d1 (3), ...
        "mb": ([20, 28, 320 + 3, 320 + 5, 320 + 11, 320 + 13, 704 + 51, 704 + 52, 704 + 53, 704 + 59, 704 + 61],
               [320 + 3, 320 + 5, 320 + 11, 320 + 12, 320 + 13, 384 + 36, 384 + 44, 704 + 51, 704 + 53, 704 + 59,
                704 + 61]),
        "mc": ([2, 9, 25, 42, 68, 94 + 4, 103, 112, 128, 145, 171, 197 + 5],
               [0, 9, 25, 42, 68, 94 + 5, 103 + 2, 112, 128, 145, 171, 197 + 4]),
    }
    for name, want in expected.items():
        fs = parse_features(name)
        assert reference_features(board, fs) == want, name
        assert _compiled(board, name) == want, name
    assert MC_OFFSETS.tolist() == [0, 9, 25, 42, 68, 94, 103, 112, 128, 145, 171, 197]


def test_king_buckets_by_the_relative_square_of_each_side_s_own_king():
    # kb's buckets: ranks 1-2 castled long (a-c) 0, centre (d-e) 1, castled short (f-h) 2; further up 3.
    # White Kg1, Black Kc8 (relative c1: castled long); then White's king on d3 (up the board).
    for fen, white_bucket, black_bucket in (("2k5/8/8/8/8/8/8/6K1 w - - 0 1", 2, 0),
                                            ("2k5/8/8/8/8/3K4/8/8 b - - 0 1", 3, 0),
                                            ("8/8/8/8/8/8/1k6/4K3 w - - 0 1", 1, 3)):
        board = chess.Board(fen)
        stm, nstm = reference_features(board, parse_features("kb"))
        white, black = (stm, nstm) if board.turn == chess.WHITE else (nstm, stm)
        assert {i // 768 for i in white} == {white_bucket}, fen
        assert {i // 768 for i in black} == {black_bucket}, fen
        assert _compiled(board, "kb") == (stm, nstm), fen
        assert sorted(i % 768 for i in white) == reference_features(board, parse_features("all"))[board.turn != chess.WHITE]


def test_hand_checked_pair_side_by_side_black_to_move():
    # White: Pd2 Ke2; Black: Ke8 to move. Black's view: d2 -> rel d7 (51), e2 -> rel e7 (52).
    board = chess.Board("4k3/8/8/8/8/8/3PK3/8 b - - 0 1")
    assert reference_features(board, parse_features("all")) == ([5 * 64 + 4, 6 * 64 + 51, 11 * 64 + 52],
                                                               [0 * 64 + 11, 5 * 64 + 12, 11 * 64 + 60])
    want = ([144 * 6 + 12 * 6 + 11], [144 * 1 + 12 * 0 + 5])  # (rank, left k, right k)
    assert reference_features(board, parse_features("ph")) == want
    assert _compiled(board, "ph") == want


def test_sums_shift_each_block_by_the_sizes_before_it():
    fs = parse_features("All + PV")
    assert (fs.spec, fs.blocks, fs.offsets, fs.size) == ("all+pv", ("all", "pv"), (0, 768), 1920)
    assert fs.max_active == BLOCK_MAX_ACTIVE["all"] + BLOCK_MAX_ACTIVE["pv"]
    assert fs.block_offsets.tolist() == [0, 768] and fs.block_ids.dtype == np.int64
    assert parse_features("pv+all").offsets == (0, 1152)
    everything = parse_features(EVERYTHING)
    assert everything.size == sum(BLOCK_SIZES[name] for name in everything.blocks) == 768 + 2 * 96 + 2 * 180 + 2 * 1152 + 768 + 206
    board = POSITIONS[3]
    for perspective in (0, 1):
        joined = []
        for name, offset in zip(everything.blocks, everything.offsets):
            joined += [offset + i for i in _compiled(board, name)[perspective]]
        assert _compiled(board, EVERYTHING)[perspective] == joined
    assert parse_features("ka+all").offsets == (0, 49152)


@pytest.mark.parametrize("spec, message", [
    ("", "empty"),
    ("  ", "empty"),
    ("all+", "empty block name"),
    ("ka+all+kb", "one king block (ka or kb), not both"),
    ("all+xyz", "unknown block 'xyz' (known: all, ka, h, v, d1, d2, ph, pv, mb, mc, kb)"),
    ("all+pv+ALL", "block 'all' given twice"),
])
def test_parse_errors_name_the_problem(spec, message):
    with pytest.raises(InputError, match="feature set") as error:
        parse_features(spec)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_batch_rejects_bad_fens_by_name():
    fs = parse_features("all")
    for fen in ["not a fen", "8/8/8/8/8/8/8/8 w - - 0 1", "4k3/8/8/8/8/8/8/4K2P w - - 0 1",
                "4k3/8/8/8/4P3/8/8/4K3 b - e6 0 1", "4k3/8/8/8/8/8/8/4K3 b - e3 0 1"]:
        with pytest.raises(InputError, match="illegal FEN"):
            batch_features([chess.STARTING_FEN, fen], fs)
    with pytest.raises(InputError, match="expected a FEN"):
        batch_features([42], fs)  # type: ignore[list-item]
