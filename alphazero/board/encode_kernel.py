"""The 24-plane encoding and the 4672-action policy indices, computed straight from the kernel's arrays.

Owns nothing of the layout itself: ``alphazero.board.encoding`` defines the planes and the actions
(its docstring has the table) and stays the oracle; the tests compare the two plane by plane and
action by action on thousands of random positions. This module only computes the same thing from
``alphazero.board.kernel``'s ``bb``/``sq``/``st`` arrays, in compiled code, so a compiled search can
encode its leaves without building a ``chess.Board``. Knows nothing of search, networks or torch.

Arrays
====================== ================= ===================================================================
``rows`` (planes)      [24, 8] uint64    one position's planes ``uint8 [24, 8, 8]`` (``out[p, rank, file]``
                                         in the side-to-move frame) viewed a rank at a time, byte f = file f
                                         (little-endian): ``plane_rows(planes)`` is that view
``moves``              [>= n] int32      the position's legal moves (kernel ints), as ``generate_moves`` or
                                         ``move_order.ordered_moves`` wrote them: plane 16 needs them, since
                                         it is set only when an en-passant capture is *legal*
``actions`` (out)      [>= n] int32      the action index of each move, in the moves' order
====================== ================= ===================================================================

Every function is ``@njit(cache=True)``. Numba checks a cache entry against its own source file
only: after editing ``kernel.py`` or ``bits.py``, delete ``alphazero/board/__pycache__/encode_kernel*``
(and the search caches, see ``alphazero.search.compiled``) so nothing keeps the old board.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from alphazero.board import encoding
from alphazero.board.bits import popcount
from alphazero.board.kernel import (
    BISHOP,
    BLACK,
    CASTLE_BK,
    CASTLE_BQ,
    CASTLE_WK,
    CASTLE_WQ,
    KNIGHT,
    NO_SQUARE,
    OCC_BLACK,
    OCC_WHITE,
    PAWN,
    QUEEN,
    ROOK,
    ST_CASTLING,
    ST_EP,
    ST_FULLMOVE,
    ST_SIDE,
    WHITE,
)
from alphazero.board.move_order import attacks_through

NUM_PLANES = encoding.NUM_PLANES
NUM_ACTIONS = encoding.NUM_ACTIONS
FROM_TO_ACTION = np.array(encoding.FROM_TO_ACTION, dtype=np.int32)  # encoding's table, [4096] int32
_ONE = np.uint64(1)


@njit(cache=True)
def attacked_squares(bb, colour):
    """Every square ``colour`` attacks (``board.is_attacked_by``), own pieces' squares included."""
    return attacks_through(bb, colour, bb[OCC_WHITE] | bb[OCC_BLACK])


@njit(cache=True)
def legal_en_passant(sq, st, moves, num_moves):
    """Whether one of the legal ``moves`` is an en-passant capture (``board.has_legal_en_passant()``)."""
    ep = st[ST_EP]
    if ep == NO_SQUARE:
        return False
    pawn = 6 * st[ST_SIDE] + PAWN
    for i in range(num_moves):
        move = moves[i]
        if (move >> 6) & 63 == ep and sq[move & 63] == pawn:
            return True
    return False


@njit(cache=True)
def _material(bb, base):
    return (popcount(bb[base + PAWN]) + 3 * popcount(bb[base + KNIGHT] | bb[base + BISHOP])
            + 5 * popcount(bb[base + ROOK]) + 9 * popcount(bb[base + QUEEN]))


def _build_expand() -> np.ndarray:
    """``[256] uint64``: a byte's eight bits spread to eight bytes of 0 or 1 (bit f -> byte f)."""
    table = np.zeros(256, np.uint64)
    for byte in range(256):
        table[byte] = np.uint64(sum(1 << (8 * f) for f in range(8) if byte >> f & 1))
    return table


EXPAND = _build_expand()
_BYTES = np.uint64(0x0101010101010101)
_LOW_BYTE = np.uint64(0xFF)


@njit(cache=True, inline="always")
def _bit_plane(rows, plane, bits, rank_flip):
    # Oriented rank r is the bitboard's byte r (White to move) or 7 - r (Black): 8 stores of 8 bytes.
    for rank in range(8):
        rows[plane, rank] = EXPAND[(bits >> np.uint64(8 * (rank ^ rank_flip))) & _LOW_BYTE]


@njit(cache=True, inline="always")
def _constant_plane(rows, plane, value):
    fill = np.uint64(value) * _BYTES
    for rank in range(8):
        rows[plane, rank] = fill


@njit(cache=True)
def encode_rows(bb, sq, st, moves, num_moves, rows):
    """Write the position's 24 planes into ``rows`` ``uint64 [24, 8]``: the planes ``uint8 [24, 8, 8]``
    viewed eight bytes (one rank, files a to h) at a time (``encoding.encode_board``)."""
    us = st[ST_SIDE]
    them = 1 - us
    flip = 7 if us == BLACK else 0
    for kind in range(6):
        _bit_plane(rows, kind, bb[6 * us + kind], flip)
        _bit_plane(rows, 6 + kind, bb[6 * them + kind], flip)
    _bit_plane(rows, 17, attacked_squares(bb, us), flip)
    _bit_plane(rows, 18, attacked_squares(bb, them), flip)
    _constant_plane(rows, 12, 1 if us == WHITE else 0)
    ours = _material(bb, 6 * us)
    theirs = _material(bb, 6 * them)
    _constant_plane(rows, 13, min(ours, 255))
    _constant_plane(rows, 14, min(theirs, 255))
    _constant_plane(rows, 15, max(0, min(ours - theirs + 128, 255)))
    en_passant = 0
    if legal_en_passant(sq, st, moves, num_moves):
        en_passant = 1 + (st[ST_EP] ^ (8 * flip))
    _constant_plane(rows, 16, en_passant)
    rights = st[ST_CASTLING]
    own_king, own_queen = (CASTLE_WK, CASTLE_WQ) if us == WHITE else (CASTLE_BK, CASTLE_BQ)
    other_king, other_queen = (CASTLE_BK, CASTLE_BQ) if us == WHITE else (CASTLE_WK, CASTLE_WQ)
    _constant_plane(rows, 19, 1 if rights & own_king else 0)
    _constant_plane(rows, 20, 1 if rights & own_queen else 0)
    _constant_plane(rows, 21, 1 if rights & other_king else 0)
    _constant_plane(rows, 22, 1 if rights & other_queen else 0)
    _constant_plane(rows, 23, min(2 * (st[ST_FULLMOVE] - 1) + us, 255))


@njit(cache=True, inline="always")
def move_action(move, flip):
    """A kernel move of the side to move -> its action index (``encoding.move_to_action``);
    ``flip`` is 56 when Black is to move, else 0."""
    start = (move & 63) ^ flip
    end = ((move >> 6) & 63) ^ flip
    promotion = move >> 12
    if promotion != 0 and promotion != QUEEN:  # under-promotion: knight 0, bishop 1, rook 2
        return (64 + 3 * (promotion - KNIGHT) + (end & 7) - (start & 7) + 1) * 64 + start
    return FROM_TO_ACTION[start * 64 + end]


@njit(cache=True)
def move_actions(st, moves, num_moves, actions):
    """Write the action index of each of ``moves[:num_moves]`` into ``actions`` (``encoding.moves_to_actions``)."""
    flip = 56 if st[ST_SIDE] == BLACK else 0
    for i in range(num_moves):
        actions[i] = move_action(moves[i], flip)


# ----------------------------------------------------------------------------------------------
# The Python edge (slow: for tests and tools, not for a search's inner loop)

def plane_rows(planes: np.ndarray) -> np.ndarray:
    """``uint8 [..., 24, 8, 8]`` planes (C-contiguous) viewed as the ``uint64 [..., 24, 8]`` rows
    ``encode_rows`` writes (the same memory)."""
    return planes.view(np.uint64)[..., 0]


def encode_position(position) -> np.ndarray:
    """A ``Position``'s planes ``uint8 [24, 8, 8]``: what ``encoding.encode_board`` gives for its board."""
    moves = position.legal_moves()
    out = np.zeros((NUM_PLANES, 8, 8), np.uint8)
    encode_rows(position.bb, position.sq, position.st, moves, len(moves), plane_rows(out))
    return out


def position_actions(position, moves: np.ndarray) -> np.ndarray:
    """Action indices ``int32 [len(moves)]`` of kernel ``moves`` in ``position`` (``encoding.moves_to_actions``)."""
    moves = np.asarray(moves, dtype=np.int32)
    actions = np.zeros(len(moves), np.int32)
    move_actions(position.st, moves, len(moves), actions)
    return actions
