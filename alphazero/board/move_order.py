"""The kernel's legal moves in exactly the order ``alphazero.board.movegen.legal_moves`` lists them.

Owns one compiled move generator, ``ordered_moves``: the same legal moves as ``kernel.generate_moves``
on the same arrays, written in the Python generator's order, so that a compiled search attaches its
priors, its Dirichlet noise, its tie-breaks and its sampled moves to the same moves, in the same
order, as the Python search does with the same seed. (The order carries no meaning of its own;
matching it is what makes the two searches comparable move for move.) It is ``movegen.legal_moves``
transcribed onto the kernel's arrays, as fast as ``generate_moves`` (a sort of the kernel's own order
cost five times more). Knows nothing of search or networks; ``movegen`` is the oracle (the tests
compare the lists on thousands of positions) and python-chess behind it.

``movegen``'s order, highest square first within each group (``bit_length() - 1`` scans):
king steps by target; knights (unpinned) by origin then target; bishops, rooks and queens together
by origin then target; unpinned pawns as single pushes, double pushes, captures towards the a-file,
captures towards the h-file, each by target, promotions as Q, R, B, N; pinned pawns by origin then
target; en-passant captures by origin; castling king-side then queen-side.

``ordered_moves(bb, sq, st, out)`` writes the legal moves into ``out`` ([>= MAX_MOVES] int32, kernel
move ints) and returns how many. Every function is ``@njit(cache=True)`` (see ``kernel`` on the cache).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from alphazero.board.bits import lsb, msb
from alphazero.board.kernel import (
    BETWEEN,
    BISHOP,
    CASTLE_BK,
    CASTLE_BQ,
    CASTLE_WK,
    CASTLE_WQ,
    KING,
    KING_ATTACKS,
    KNIGHT,
    KNIGHT_ATTACKS,
    LINE,
    MAX_MOVES,
    NO_SQUARE,
    OCC_WHITE,
    PAWN,
    PAWN_ATTACKS,
    QUEEN,
    ROOK,
    ST_CASTLING,
    ST_EP,
    ST_SIDE,
    WHITE,
    attackers,
    bishop_attacks,
    en_passant_is_safe,
    pinned_pieces,
    rook_attacks,
)

_ONE = np.uint64(1)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_FILE_A = np.uint64(0x0101010101010101)
_FILE_H = np.uint64(0x8080808080808080)
_RANK_3 = np.uint64(0x0000000000FF0000)
_RANK_6 = np.uint64(0x0000FF0000000000)
_BACK_RANKS = np.uint64(0xFF000000000000FF)
_RANK_2 = np.uint64(0x000000000000FF00)
_RANK_7 = np.uint64(0x00FF000000000000)


@njit(cache=True, inline="always")
def _bit(square):
    return _ONE << np.uint64(square)


@njit(cache=True, inline="always")
def _move(start, end, promotion):
    return np.int32(start | end << 6 | promotion << 12)


@njit(cache=True)
def attacks_through(bb, colour, occupied):
    """Every square ``colour`` attacks, its sliders seeing through ``occupied``."""
    base = 6 * colour
    attacks = np.uint64(0)
    pieces = bb[base + PAWN]
    while pieces:
        square = lsb(pieces)
        pieces &= pieces - _ONE
        attacks |= PAWN_ATTACKS[colour, square]
    pieces = bb[base + KNIGHT]
    while pieces:
        square = lsb(pieces)
        pieces &= pieces - _ONE
        attacks |= KNIGHT_ATTACKS[square]
    pieces = bb[base + BISHOP] | bb[base + QUEEN]
    while pieces:
        square = lsb(pieces)
        pieces &= pieces - _ONE
        attacks |= bishop_attacks(square, occupied)
    pieces = bb[base + ROOK] | bb[base + QUEEN]
    while pieces:
        square = lsb(pieces)
        pieces &= pieces - _ONE
        attacks |= rook_attacks(square, occupied)
    king = bb[base + KING]
    if king:
        attacks |= KING_ATTACKS[lsb(king)]
    return attacks


@njit(cache=True)
def _targets_down(out, n, start, targets):
    """Moves from ``start`` to each of ``targets``, highest target first."""
    while targets:
        to = msb(targets)
        targets ^= _bit(to)
        out[n] = _move(start, to, 0)
        n += 1
    return n


@njit(cache=True)
def _pawn_to(out, n, start, to):
    """A pawn move; on a back rank the four promotions in movegen's order (Q, R, B, N)."""
    if _bit(to) & _BACK_RANKS:
        out[n] = _move(start, to, QUEEN)
        out[n + 1] = _move(start, to, ROOK)
        out[n + 2] = _move(start, to, BISHOP)
        out[n + 3] = _move(start, to, KNIGHT)
        return n + 4
    out[n] = _move(start, to, 0)
    return n + 1


@njit(cache=True)
def _shifted_down(out, n, targets, delta):
    """Pawn moves to each of ``targets`` from ``target + delta``, highest target first."""
    while targets:
        to = msb(targets)
        targets ^= _bit(to)
        n = _pawn_to(out, n, to + delta, to)
    return n


@njit(cache=True)
def ordered_moves(bb, sq, st, out):
    """The legal moves into ``out`` in ``movegen.legal_moves``'s order; returns how many."""
    us = st[ST_SIDE]
    them = 1 - us
    ours = bb[OCC_WHITE + us]
    theirs = bb[OCC_WHITE + them]
    occupied = ours | theirs
    king_bb = bb[6 * us + KING]
    king = lsb(king_bb)
    enemy = attacks_through(bb, them, occupied ^ king_bb)
    checkers = attackers(bb, king, them, occupied)
    n = _targets_down(out, 0, king, KING_ATTACKS[king] & ~ours & ~enemy)
    if checkers & (checkers - _ONE):  # double check: only the king moves
        return n
    if checkers:
        allowed = checkers | BETWEEN[king, lsb(checkers)]
    else:
        allowed = _ALL
    pinned = pinned_pieces(bb, us)
    not_ours = ~ours & allowed
    own = 6 * us

    pieces = bb[own + KNIGHT] & ~pinned  # a pinned knight never moves
    while pieces:
        start = msb(pieces)
        pieces ^= _bit(start)
        n = _targets_down(out, n, start, KNIGHT_ATTACKS[start] & not_ours)
    diagonal = bb[own + BISHOP] | bb[own + QUEEN]
    straight = bb[own + ROOK] | bb[own + QUEEN]
    pieces = diagonal | straight
    while pieces:
        start = msb(pieces)
        here = _bit(start)
        pieces ^= here
        targets = np.uint64(0)
        if here & diagonal:
            targets = bishop_attacks(start, occupied)
        if here & straight:
            targets |= rook_attacks(start, occupied)
        targets &= not_ours
        if here & pinned:
            targets &= LINE[king, start]
        n = _targets_down(out, n, start, targets)

    # Pawns: pushes and captures in bulk for the free ones, one by one for the pinned ones.
    pawns = bb[own + PAWN]
    empty = ~occupied
    free = pawns & ~pinned
    if us == WHITE:
        single = (free << np.uint64(8)) & empty
        double = ((single & _RANK_3) << np.uint64(8)) & empty & allowed
        single &= allowed
        left = ((free & ~_FILE_A) << np.uint64(7)) & theirs & allowed
        right = ((free & ~_FILE_H) << np.uint64(9)) & theirs & allowed
        n = _shifted_down(out, n, single, -8)
        n = _shifted_down(out, n, double, -16)
        n = _shifted_down(out, n, left, -7)
        n = _shifted_down(out, n, right, -9)
    else:
        single = (free >> np.uint64(8)) & empty
        double = ((single & _RANK_6) >> np.uint64(8)) & empty & allowed
        single &= allowed
        left = ((free & ~_FILE_A) >> np.uint64(9)) & theirs & allowed
        right = ((free & ~_FILE_H) >> np.uint64(7)) & theirs & allowed
        n = _shifted_down(out, n, single, 8)
        n = _shifted_down(out, n, double, 16)
        n = _shifted_down(out, n, left, 9)
        n = _shifted_down(out, n, right, 7)
    pinned_pawns = pawns & pinned
    if pinned_pawns:
        forward = 8 if us == WHITE else -8
        start_rank = _RANK_2 if us == WHITE else _RANK_7
        while pinned_pawns:
            start = msb(pinned_pawns)
            pinned_pawns ^= _bit(start)
            targets = PAWN_ATTACKS[us, start] & theirs
            one = start + forward
            if _bit(one) & empty:
                targets |= _bit(one)
                two = one + forward
                if _bit(start) & start_rank and _bit(two) & empty:
                    targets |= _bit(two)
            targets &= allowed & LINE[king, start]
            while targets:
                to = msb(targets)
                targets ^= _bit(to)
                n = _pawn_to(out, n, start, to)
    ep = st[ST_EP]
    if ep != NO_SQUARE:
        # Each capturer, highest first, if its king is safe once both pawns have left their squares.
        capturers = PAWN_ATTACKS[them, ep] & pawns
        while capturers:
            start = msb(capturers)
            capturers ^= _bit(start)
            if en_passant_is_safe(bb, us, king, start, ep, occupied):
                out[n] = _move(start, ep, 0)
                n += 1

    if not checkers:
        rights = st[ST_CASTLING]
        home = 56 * us
        kingside = CASTLE_WK if us == WHITE else CASTLE_BK
        queenside = CASTLE_WQ if us == WHITE else CASTLE_BQ
        if rights & kingside:
            path = _bit(home + 5) | _bit(home + 6)
            if not path & occupied and not path & enemy:
                out[n] = _move(home + 4, home + 6, 0)
                n += 1
        if rights & queenside:
            if not (_bit(home + 1) | _bit(home + 2) | _bit(home + 3)) & occupied \
                    and not (_bit(home + 2) | _bit(home + 3)) & enemy:
                out[n] = _move(home + 4, home + 2, 0)
                n += 1
    return n


def legal_moves_in_order(position) -> np.ndarray:
    """A ``Position``'s legal moves ``int32 [n]`` in movegen's order (slow edge, for tests and tools)."""
    out = np.zeros(MAX_MOVES, np.int32)
    n = ordered_moves(position.bb, position.sq, position.st, out)
    return out[:n].copy()
