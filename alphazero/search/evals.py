"""Static evaluations for the alpha-beta search, and the seam a new one plugs into.

Owns the evaluation kinds (``EVALS``: name -> id, plus ``EVAL_NNUE`` for a network file) and the two
compiled entry points the search calls; knows the board only through ``alphazero.board.kernel``'s
arrays and nothing of torch.

The seam (every evaluation answers these two, selected by its integer ``kind``):

``eval_root(kind, bb, sq, st, keys, params, acc)``
    called once before a search, at search ply 0: an NNUE fills its root row.
``evaluate(kind, bb, sq, st, keys, ply, params, acc) -> int``
    centipawns for the side to move, at search ply ``ply`` (the board's ``keys`` history says which
    positions lie on the path from the root: ``keys[st[ST_PLY] - b]`` is the one ``b`` plies up).
    Interior nodes that are not evaluated leave no state behind, so an evaluation must not assume
    the row of ``ply - 1`` is its parent's: the NNUE (``alphazero.search.nnue_eval``) diffs its
    pieces and feature lists against the best row it can find, and unmake needs no hook.

``params = (header, weights)`` (int64 [H], int16 [W]: the evaluation's constants) and
``acc = (rows, lists, row_keys, cache_keys, cache_values, boards)`` (int16 [R, 2, L1], int32 [R, 2, 1 + M],
uint64 [R]: scratch by search ply; uint64 [C], int32 [C]: an evaluation cache; uint64 [R, 12]: the
piece bitboards each row sums) are the evaluation's
own; ``material_state()`` makes the empty ones ``material`` takes, ``nnue_eval.pack`` /
``nnue_eval.new_scratch`` an NNUE's. Every kind takes the same array types, and numba cannot cache a
search compiled against a function passed in as an argument (the function object's identity is part
of the type), so new kinds are added as a branch here, by id, and the
search is compiled once for all of them.

``material`` (id 0): material plus piece-square tables, tapered between the middlegame and the
endgame by the phase (knight and bishop 1, rook 2, queen 4; 24 = all pieces on the board): PeSTO's
tables (Ronald Friederich's, from the Chess Programming Wiki), values and squares as published.

``EVAL_NNUE`` (id 1): a quantised NNUE (``alphazero.nets.nnue_file``), evaluated by
``alphazero.search.nnue_eval`` with incrementally updated int16 accumulators.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from alphazero.board.bits import lsb
from alphazero.board.kernel import ST_SIDE, WHITE
from alphazero.search.nnue_eval import H_SIZE, new_scratch, nnue_evaluate, nnue_root

EVAL_MATERIAL = 0
EVAL_NNUE = 1
EVALS = {"material": EVAL_MATERIAL}  # evaluations known by name; an NNUE is known by its file

_ONE = np.uint64(1)

# PeSTO, as published: each table from a8 (top left) to h1, White's view; types P N B R Q K.
_MG_VALUE = [82, 337, 365, 477, 1025, 0]
_EG_VALUE = [94, 281, 297, 512, 936, 0]
_PHASE = [0, 1, 1, 2, 4, 0]
_MG_PST = [
    [0, 0, 0, 0, 0, 0, 0, 0, 98, 134, 61, 95, 68, 126, 34, -11, -6, 7, 26, 31, 65, 56, 25, -20,
     -14, 13, 6, 21, 23, 12, 17, -23, -27, -2, -5, 12, 17, 6, 10, -25, -26, -4, -4, -10, 3, 3, 33, -12,
     -35, -1, -20, -23, -15, 24, 38, -22, 0, 0, 0, 0, 0, 0, 0, 0],
    [-167, -89, -34, -49, 61, -97, -15, -107, -73, -41, 72, 36, 23, 62, 7, -17, -47, 60, 37, 65, 84, 129, 73, 44,
     -9, 17, 19, 53, 37, 69, 18, 22, -13, 4, 16, 13, 28, 19, 21, -8, -23, -9, 12, 10, 19, 17, 25, -16,
     -29, -53, -12, -3, -1, 18, -14, -19, -105, -21, -58, -33, -17, -28, -19, -23],
    [-29, 4, -82, -37, -25, -42, 7, -8, -26, 16, -18, -13, 30, 59, 18, -47, -16, 37, 43, 40, 35, 50, 37, -2,
     -4, 5, 19, 50, 37, 37, 7, -2, -6, 13, 13, 26, 34, 12, 10, 4, 0, 15, 15, 15, 14, 27, 18, 10,
     4, 15, 16, 0, 7, 21, 33, 1, -33, -3, -14, -21, -13, -12, -39, -21],
    [32, 42, 32, 51, 63, 9, 31, 43, 27, 32, 58, 62, 80, 67, 26, 44, -5, 19, 26, 36, 17, 45, 61, 16,
     -24, -11, 7, 26, 24, 35, -8, -20, -36, -26, -12, -1, 9, -7, 6, -23, -45, -25, -16, -17, 3, 0, -5, -33,
     -44, -16, -20, -9, -1, 11, -6, -71, -19, -13, 1, 17, 16, 7, -37, -26],
    [-28, 0, 29, 12, 59, 44, 43, 45, -24, -39, -5, 1, -16, 57, 28, 54, -13, -17, 7, 8, 29, 56, 47, 57,
     -27, -27, -16, -16, -1, 17, -2, 1, -9, -26, -9, -10, -2, -4, 3, -3, -14, 2, -11, -2, -5, 2, 14, 5,
     -35, -8, 11, 2, 8, 15, -3, 1, -1, -18, -9, 10, -15, -25, -31, -50],
    [-65, 23, 16, -15, -56, -34, 2, 13, 29, -1, -20, -7, -8, -4, -38, -29, -9, 24, 2, -16, -20, 6, 22, -22,
     -17, -20, -12, -27, -30, -25, -14, -36, -49, -1, -27, -39, -46, -44, -33, -51, -14, -14, -22, -46, -44, -30, -15, -27,
     1, 7, -8, -64, -43, -16, 9, 8, -15, 36, 12, -54, 8, -28, 24, 14],
]
_EG_PST = [
    [0, 0, 0, 0, 0, 0, 0, 0, 178, 173, 158, 134, 147, 132, 165, 187, 94, 100, 85, 67, 56, 53, 82, 84,
     32, 24, 13, 5, -2, 4, 17, 17, 13, 9, -3, -7, -7, -8, 3, -1, 4, 7, -6, 1, 0, -5, -1, -8,
     13, 8, 8, 10, 13, 0, 2, -7, 0, 0, 0, 0, 0, 0, 0, 0],
    [-58, -38, -13, -28, -31, -27, -63, -99, -25, -8, -25, -2, -9, -25, -24, -52, -24, -20, 10, 9, -1, -9, -19, -41,
     -17, 3, 22, 22, 22, 11, 8, -18, -18, -6, 16, 25, 16, 17, 4, -18, -23, -3, -1, 15, 10, -3, -20, -22,
     -42, -20, -10, -5, -2, -20, -23, -44, -29, -51, -23, -15, -22, -18, -50, -64],
    [-14, -21, -11, -8, -7, -9, -17, -24, -8, -4, 7, -12, -3, -13, -4, -14, 2, -8, 0, -1, -2, 6, 0, 4,
     -3, 9, 12, 9, 14, 10, 3, 2, -6, 3, 13, 19, 7, 10, -3, -9, -12, -3, 8, 10, 13, 3, -7, -15,
     -14, -18, -7, -1, 4, -9, -15, -27, -23, -9, -23, -5, -9, -16, -5, -17],
    [13, 10, 18, 15, 12, 12, 8, 5, 11, 13, 13, 11, -3, 3, 8, 3, 7, 7, 7, 5, 4, -3, -5, -3,
     4, 3, 13, 1, 2, 1, -1, 2, 3, 5, 8, 4, -5, -6, -8, -11, -4, 0, -5, -1, -7, -12, -8, -16,
     -6, -6, 0, 2, -9, -9, -11, -3, -9, 2, 3, -1, -5, -13, 4, -20],
    [-9, 22, 22, 27, 27, 19, 10, 20, -17, 20, 32, 41, 58, 25, 30, 0, -20, 6, 9, 49, 47, 35, 19, 9,
     3, 22, 24, 45, 57, 40, 57, 36, -18, 28, 19, 47, 31, 34, 39, 23, -16, -27, 15, 6, 9, 17, 10, 5,
     -22, -23, -30, -16, -16, -23, -36, -32, -33, -28, -22, -43, -5, -32, -20, -41],
    [-74, -35, -18, -18, -11, 15, 4, -17, -12, 17, 14, 17, 17, 38, 23, 11, 10, 17, 23, 15, 20, 45, 44, 13,
     -8, 22, 24, 27, 26, 33, 26, 3, -18, -4, 21, 24, 27, 23, 9, -11, -19, -3, 11, 21, 23, 16, 7, -9,
     -27, -11, 4, 13, 14, 4, -5, -17, -53, -34, -21, -11, -28, -14, -24, -43],
]


def _signed_tables(values: list[int], psts: list[list[int]]) -> np.ndarray:
    """[12, 64] int32 by piece code and square (a1 = 0): White's entries positive, Black's negative.

    A published table lists a8 first, so White's square s reads entry ``s ^ 56`` and Black's
    (the board seen from the other side) entry ``s``."""
    table = np.zeros((12, 64), np.int32)
    for kind in range(6):
        for square in range(64):
            table[kind, square] = values[kind] + psts[kind][square ^ 56]
            table[6 + kind, square] = -(values[kind] + psts[kind][square])
    return table


MG_TABLE = _signed_tables(_MG_VALUE, _MG_PST)
EG_TABLE = _signed_tables(_EG_VALUE, _EG_PST)
PHASE = np.array(_PHASE + _PHASE, np.int64)  # [12] by piece code


@njit(cache=True)
def material(bb, st):
    """PeSTO's tapered material and piece-square score, centipawns for the side to move."""
    mg = 0
    eg = 0
    phase = 0
    for piece in range(12):
        pieces = bb[piece]
        while pieces:
            square = lsb(pieces)
            pieces &= pieces - _ONE
            mg += MG_TABLE[piece, square]
            eg += EG_TABLE[piece, square]
            phase += PHASE[piece]
    if phase > 24:
        phase = 24  # early promotions
    total = mg * phase + eg * (24 - phase)
    # Rounded toward zero, so a position and its colour-mirror score exactly opposite for White (floor
    # division would round a negative total down: -1 cp apart).
    score = total // 24 if total >= 0 else -(-total // 24)
    return score if st[ST_SIDE] == WHITE else -score


def material_state() -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, ...]]:
    """``(params, acc)`` for an evaluation without state (``material``): empty, of the seam's types."""
    return (np.zeros(H_SIZE, np.int64), np.zeros(0, np.int16)), new_scratch(1, 1, 0, cache=1)


@njit(cache=True)
def eval_root(kind, bb, sq, st, keys, params, acc):
    """Prepare ``kind``'s state for a search from this position (nothing for ``material``)."""
    if kind == EVAL_NNUE:
        nnue_root(params[0], params[1], bb, sq, st, keys, acc[0], acc[1], acc[2], acc[5])


@njit(cache=True)
def evaluate(kind, bb, sq, st, keys, ply, params, acc):
    """Centipawns for the side to move by evaluation ``kind`` (see the module docstring)."""
    if kind == EVAL_MATERIAL:
        return material(bb, st)
    if kind == EVAL_NNUE:
        return nnue_evaluate(params[0], params[1], bb, sq, st, keys, ply, acc[0], acc[1], acc[2], acc[3], acc[4],
                             acc[5])
    return 0
