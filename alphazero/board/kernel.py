"""The compiled board: a chess position as five arrays, legal moves, make/unmake, keys and rules.

Owns the position layout below and every compiled function that reads or changes it. Knows nothing
of search, networks or torch; python-chess is its oracle (tests compare perft counts, move sets,
keys and draw rules position by position) and appears only in ``alphazero.board.position``, the
thin Python layer that converts at the edge. Standard chess only (no Chess960).

Layout (squares as python-chess numbers them: a1 = 0, b1 = 1, ..., h8 = 63)
=========== ================ ==========================================================================
array       shape, dtype     content
=========== ================ ==========================================================================
``bb``      [14] uint64      bitboards: ``bb[piece]`` for the 12 piece codes, ``bb[12 + colour]`` the
                             squares of that colour (``bb[OCC_WHITE]``, ``bb[OCC_BLACK]``)
``sq``      [64] int8        mailbox: the piece code on each square, ``EMPTY`` (12) where none
``st``      [6] int64        scalars: ``ST_SIDE`` (0 White, 1 Black to move), ``ST_CASTLING`` (bits
                             1 White O-O, 2 White O-O-O, 4 Black O-O, 8 Black O-O-O), ``ST_EP`` (the
                             en-passant target square, ``NO_SQUARE`` (-1) unless a pawn of the side to
                             move stands ready to take it), ``ST_HALFMOVE``, ``ST_FULLMOVE``,
                             ``ST_PLY`` (moves made since the arrays were set up: the row of the
                             current key in ``keys`` and of the next record in ``undo``)
``keys``    [H] uint64       Zobrist key after each move: ``keys[st[ST_PLY]]`` is the current key,
                             earlier rows the history that repetitions are looked up in
``undo``    [H, 5] int32     one record per move made: ``U_MOVE``, ``U_CAPTURED`` (piece code taken on
                             the destination, ``EMPTY`` if none, en passant included), and the
                             ``U_CASTLING``, ``U_EP``, ``U_HALFMOVE`` of the position before it
=========== ================ ==========================================================================

Piece code = ``6 * colour + type``, colours ``WHITE`` 0, ``BLACK`` 1, types ``PAWN`` 0 ... ``KING`` 5
(python-chess's piece type minus one). ``H`` (``HISTORY``) bounds moves made since set-up, game
history replayed for repetitions plus search plies.

A move is an ``int32``: ``from | to << 6 | promotion << 12``, promotion the piece type promoted to
(``KNIGHT`` 1 ... ``QUEEN`` 4) or 0; ``NO_MOVE`` (0, a1a1) is the null move and "no move".
Castling is the king's two-square move, en passant the pawn's diagonal move to ``ST_EP``.

Keys are Polyglot's (``chess.polyglot.zobrist_hash``): the en-passant file is hashed only when a
pawn stands ready to capture, legality aside. So a repetition whose only difference is an en-passant
capture that a pin makes illegal counts as different here, where python-chess sees it as the same.

Every function here is ``@njit(cache=True)``: the first process compiles (see
``alphazero.bench.alphabeta`` for the cost), later ones load the machine code from ``__pycache__``.
Numba checks a cache entry against its own source file only: after editing this module, delete the
other modules' caches too (``find alphazero -name '*.nb[ic]' -delete``), or the searches keep the old
board compiled into them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from alphazero.board.bits import lsb, msb, popcount

WHITE, BLACK = 0, 1
PAWN, KNIGHT, BISHOP, ROOK, QUEEN, KING = 0, 1, 2, 3, 4, 5
EMPTY = 12
OCC_WHITE, OCC_BLACK = 12, 13
NO_SQUARE = -1
NO_MOVE = 0
ST_SIDE, ST_CASTLING, ST_EP, ST_HALFMOVE, ST_FULLMOVE, ST_PLY = 0, 1, 2, 3, 4, 5
ST_SIZE = 6
U_MOVE, U_CAPTURED, U_CASTLING, U_EP, U_HALFMOVE = 0, 1, 2, 3, 4
U_SIZE = 5
HISTORY = 1536
MAX_MOVES = 256  # no legal position has more than 218 moves
CASTLE_WK, CASTLE_WQ, CASTLE_BK, CASTLE_BQ = 1, 2, 4, 8

_ZERO = np.uint64(0)
_ONE = np.uint64(1)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_DARK = np.uint64(0xAA55AA55AA55AA55)  # a1 is dark
_LIGHT = ~_DARK


# ----------------------------------------------------------------------------------------------
# Tables, built once in plain numpy (each a few microseconds) and frozen into the compiled code.

def _on_board(rank: int, file: int) -> bool:
    return 0 <= rank < 8 and 0 <= file < 8


def _leaper(steps: list[tuple[int, int]]) -> np.ndarray:
    table = np.zeros(64, np.uint64)
    for square in range(64):
        rank, file = divmod(square, 8)
        for dr, df in steps:
            if _on_board(rank + dr, file + df):
                table[square] |= np.uint64(1) << np.uint64((rank + dr) * 8 + file + df)
    return table


# Ray directions: the first four increase the square number (the nearest blocker is the lowest set
# bit), the last four decrease it (the highest set bit).
_DIRECTIONS = [(1, 0), (0, 1), (1, 1), (1, -1), (-1, 0), (0, -1), (-1, -1), (-1, 1)]
N_, E_, NE_, NW_, S_, W_, SW_, SE_ = range(8)


def _build_tables():
    rays = np.zeros((8, 64), np.uint64)  # [direction, square] squares beyond the square, to the edge
    for d, (dr, df) in enumerate(_DIRECTIONS):
        for square in range(64):
            rank, file = divmod(square, 8)
            r, f = rank + dr, file + df
            while _on_board(r, f):
                rays[d, square] |= np.uint64(1) << np.uint64(r * 8 + f)
                r, f = r + dr, f + df
    between = np.zeros((64, 64), np.uint64)  # [a, b] squares strictly between, 0 if not aligned
    line = np.zeros((64, 64), np.uint64)  # [a, b] the whole line through a and b, 0 if not aligned
    for a in range(64):
        for d in range(8):
            ray = int(rays[d, a])
            for b in range(64):
                if ray >> b & 1:
                    between[a, b] = np.uint64(ray & ~int(rays[d, b]) & ~(1 << b))
                    line[a, b] = rays[d, a] | rays[(d + 4) % 8, a] | (np.uint64(1) << np.uint64(a))
    knight = _leaper([(1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2)])
    king = _leaper([(1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1)])
    pawn = np.stack([_leaper([(1, -1), (1, 1)]), _leaper([(-1, -1), (-1, 1)])])  # [colour, square]
    rook_empty = rays[N_] | rays[E_] | rays[S_] | rays[W_]  # rook attacks on an empty board
    bishop_empty = rays[NE_] | rays[NW_] | rays[SW_] | rays[SE_]
    return rays, between, line, knight, king, pawn, rook_empty, bishop_empty


RAYS, BETWEEN, LINE, KNIGHT_ATTACKS, KING_ATTACKS, PAWN_ATTACKS, ROOK_EMPTY, BISHOP_EMPTY = _build_tables()

# Castling rights kept after a move touches a square: moving from or capturing on a1 loses O-O-O, ...
CASTLING_KEEP = np.full(64, 15, np.int64)
CASTLING_KEEP[0], CASTLING_KEEP[7], CASTLING_KEEP[4] = 15 - CASTLE_WQ, 15 - CASTLE_WK, 15 - CASTLE_WQ - CASTLE_WK
CASTLING_KEEP[56], CASTLING_KEEP[63], CASTLING_KEEP[60] = 15 - CASTLE_BQ, 15 - CASTLE_BK, 15 - CASTLE_BQ - CASTLE_BK


def _build_zobrist():
    from chess.polyglot import POLYGLOT_RANDOM_ARRAY as R

    piece = np.zeros((13, 64), np.uint64)  # [piece code, square]; row EMPTY stays 0
    for colour in (WHITE, BLACK):
        for kind in range(6):
            polyglot_kind = 2 * kind + (1 if colour == WHITE else 0)  # Polyglot: black pawn 0, white pawn 1, ...
            for square in range(64):
                piece[6 * colour + kind, square] = np.uint64(R[64 * polyglot_kind + square])
    castling = np.zeros(16, np.uint64)  # [rights bits] the XOR of each right held
    for rights in range(16):
        key = 0
        for bit in range(4):
            if rights >> bit & 1:
                key ^= R[768 + bit]
        castling[rights] = np.uint64(key)
    ep = np.array([R[772 + file] for file in range(8)], np.uint64)
    return piece, castling, ep, np.uint64(R[780])


Z_PIECE, Z_CASTLING, Z_EP, Z_WHITE = _build_zobrist()


# ----------------------------------------------------------------------------------------------
# Attacks

@njit(cache=True, inline="always")
def bit(square):
    return _ONE << np.uint64(square)


@njit(cache=True, inline="always")
def _slide(square, occupied, up_1, up_2, down_1, down_2):
    """Squares along four rays from ``square`` up to and including the first blocker in ``occupied``:
    two rays towards higher squares (the nearest blocker is the lowest set bit), two towards lower."""
    attacks = _ZERO
    for d in (up_1, up_2):
        ray = RAYS[d, square]
        blockers = ray & occupied
        if blockers:
            ray ^= RAYS[d, lsb(blockers)]
        attacks |= ray
    for d in (down_1, down_2):
        ray = RAYS[d, square]
        blockers = ray & occupied
        if blockers:
            ray ^= RAYS[d, msb(blockers)]
        attacks |= ray
    return attacks


@njit(cache=True)
def rook_attacks(square, occupied):
    """Squares a rook on ``square`` attacks through ``occupied`` (first blocker included)."""
    return _slide(square, occupied, N_, E_, S_, W_)


@njit(cache=True)
def bishop_attacks(square, occupied):
    """Squares a bishop on ``square`` attacks through ``occupied`` (first blocker included)."""
    return _slide(square, occupied, NE_, NW_, SW_, SE_)


@njit(cache=True)
def attackers(bb, square, colour, occupied):
    """Bitboard of ``colour``'s pieces attacking ``square``, sliders seeing through ``occupied``."""
    base = 6 * colour
    found = KNIGHT_ATTACKS[square] & bb[base + KNIGHT]
    found |= KING_ATTACKS[square] & bb[base + KING]
    found |= PAWN_ATTACKS[1 - colour, square] & bb[base + PAWN]
    found |= bishop_attacks(square, occupied) & (bb[base + BISHOP] | bb[base + QUEEN])
    found |= rook_attacks(square, occupied) & (bb[base + ROOK] | bb[base + QUEEN])
    return found


@njit(cache=True)
def is_attacked(bb, square, colour, occupied):
    """Whether ``colour`` attacks ``square`` (cheapest tests first)."""
    base = 6 * colour
    if KNIGHT_ATTACKS[square] & bb[base + KNIGHT]:
        return True
    if PAWN_ATTACKS[1 - colour, square] & bb[base + PAWN]:
        return True
    if KING_ATTACKS[square] & bb[base + KING]:
        return True
    queens = bb[base + QUEEN]
    sliders = bb[base + BISHOP] | queens
    if BISHOP_EMPTY[square] & sliders and bishop_attacks(square, occupied) & sliders:
        return True
    sliders = bb[base + ROOK] | queens
    if ROOK_EMPTY[square] & sliders and rook_attacks(square, occupied) & sliders:
        return True
    return False


@njit(cache=True)
def in_check(bb, st):
    """Whether the side to move is in check."""
    side = st[ST_SIDE]
    return is_attacked(bb, lsb(bb[6 * side + KING]), 1 - side, bb[OCC_WHITE] | bb[OCC_BLACK])


@njit(cache=True, inline="always")
def pinned_pieces(bb, us):
    """Our pieces that alone stand between our king and an enemy slider on its line."""
    base = 6 * (1 - us)
    ours = bb[OCC_WHITE + us]
    occupied = bb[OCC_WHITE] | bb[OCC_BLACK]
    king = lsb(bb[6 * us + KING])
    pinned = _ZERO
    snipers = (ROOK_EMPTY[king] & (bb[base + ROOK] | bb[base + QUEEN])) | \
        (BISHOP_EMPTY[king] & (bb[base + BISHOP] | bb[base + QUEEN]))
    while snipers:
        sniper = lsb(snipers)
        snipers &= snipers - _ONE
        blockers = BETWEEN[king, sniper] & occupied
        if blockers and not blockers & (blockers - _ONE) and blockers & ours:
            pinned |= blockers
    return pinned


@njit(cache=True, inline="always")
def en_passant_is_safe(bb, us, king, start, ep, occupied):
    """Whether our pawn on ``start`` may take en passant on ``ep``: our king on ``king`` is not attacked
    once both pawns have left their squares (rare and subtle: the two pawns may leave a rank at once)."""
    base = 6 * (1 - us)
    taken = ep - 8 if us == WHITE else ep + 8
    after = (occupied ^ bit(start) ^ bit(taken)) | bit(ep)
    return not (KNIGHT_ATTACKS[king] & bb[base + KNIGHT]) \
        and not (PAWN_ATTACKS[us, king] & (bb[base + PAWN] ^ bit(taken))) \
        and not (bishop_attacks(king, after) & (bb[base + BISHOP] | bb[base + QUEEN])) \
        and not (rook_attacks(king, after) & (bb[base + ROOK] | bb[base + QUEEN]))


# ----------------------------------------------------------------------------------------------
# Legal move generation

@njit(cache=True, inline="always")
def encode_move(start, end, promotion):
    return np.int32(start | end << 6 | promotion << 12)


@njit(cache=True, inline="always")
def _add_moves(out, n, start, targets):
    """Moves from ``start`` to each of ``targets``, lowest target first; returns the new count."""
    while targets:
        out[n] = encode_move(start, lsb(targets), 0)
        n += 1
        targets &= targets - _ONE
    return n


@njit(cache=True, inline="always")
def _add_slider_moves(out, n, pieces, straight, occupied, mask, pinned, king):
    """Moves of the rook movers (``straight``) or bishop movers among ``pieces`` to the squares of ``mask``
    they attack, a pinned one along its king's line only; returns the new count."""
    while pieces:
        start = lsb(pieces)
        pieces &= pieces - _ONE
        targets = (rook_attacks(start, occupied) if straight else bishop_attacks(start, occupied)) & mask
        if pinned & bit(start):
            targets &= LINE[king, start]
        n = _add_moves(out, n, start, targets)
    return n


@njit(cache=True)
def _add_pawn_moves(out, n, start, end, promote, queens_only):
    if promote:
        out[n] = encode_move(start, end, QUEEN)
        n += 1
        if not queens_only:
            out[n] = encode_move(start, end, ROOK)
            out[n + 1] = encode_move(start, end, BISHOP)
            out[n + 2] = encode_move(start, end, KNIGHT)
            n += 3
    else:
        out[n] = encode_move(start, end, 0)
        n += 1
    return n


@njit(cache=True)
def generate_moves(bb, sq, st, out, tactical_only):
    """Write the legal moves into ``out`` ([>= MAX_MOVES] int32) and return how many.

    ``tactical_only`` (for quiescence) keeps captures (en passant included) and queen promotions;
    pass it only when the side to move is not in check. Checks and pins are computed once, so
    every move written is legal: no make-and-test.
    """
    us = st[ST_SIDE]
    them = 1 - us
    ours = bb[OCC_WHITE + us]
    theirs = bb[OCC_WHITE + them]
    occupied = ours | theirs
    king = lsb(bb[6 * us + KING])
    n = 0

    # King moves: the king itself must not shield the square it steps to from a slider.
    targets = KING_ATTACKS[king] & ~ours
    if tactical_only:
        targets &= theirs
    without_king = occupied ^ bit(king)
    while targets:
        to = lsb(targets)
        targets &= targets - _ONE
        if not is_attacked(bb, to, them, without_king):
            out[n] = encode_move(king, to, 0)
            n += 1

    checkers = attackers(bb, king, them, occupied)
    n_checkers = popcount(checkers)
    if n_checkers > 1:
        return n  # double check: only the king moves
    if n_checkers == 1:
        checker = lsb(checkers)
        allowed = BETWEEN[king, checker] | checkers  # block or capture
    else:
        allowed = _ALL
        if not tactical_only:
            rights = st[ST_CASTLING]
            home = 56 * us
            kingside = CASTLE_WK if us == WHITE else CASTLE_BK
            queenside = CASTLE_WQ if us == WHITE else CASTLE_BQ
            if rights & kingside and not occupied & (bit(home + 5) | bit(home + 6)):
                if not is_attacked(bb, home + 5, them, occupied) and not is_attacked(bb, home + 6, them, occupied):
                    out[n] = encode_move(home + 4, home + 6, 0)
                    n += 1
            if rights & queenside and not occupied & (bit(home + 1) | bit(home + 2) | bit(home + 3)):
                if not is_attacked(bb, home + 3, them, occupied) and not is_attacked(bb, home + 2, them, occupied):
                    out[n] = encode_move(home + 4, home + 2, 0)
                    n += 1

    pinned = pinned_pieces(bb, us)
    mask = allowed & ~ours
    if tactical_only:
        mask &= theirs
    own = 6 * us
    pieces = bb[own + KNIGHT] & ~pinned  # a pinned knight never moves
    while pieces:
        start = lsb(pieces)
        pieces &= pieces - _ONE
        n = _add_moves(out, n, start, KNIGHT_ATTACKS[start] & mask)
    n = _add_slider_moves(out, n, bb[own + BISHOP] | bb[own + QUEEN], False, occupied, mask, pinned, king)
    n = _add_slider_moves(out, n, bb[own + ROOK] | bb[own + QUEEN], True, occupied, mask, pinned, king)

    # Pawns, one at a time: pushes, double pushes, captures, promotions, en passant.
    forward = 8 if us == WHITE else -8
    last_rank = 7 if us == WHITE else 0
    double_rank = 1 if us == WHITE else 6
    ep = st[ST_EP]
    pieces = bb[own + PAWN]
    while pieces:
        start = lsb(pieces)
        pieces &= pieces - _ONE
        legal = allowed
        if pinned & bit(start):
            legal &= LINE[king, start]
        one = start + forward
        promote = (one >> 3) == last_rank
        if sq[one] == EMPTY and (not tactical_only or promote):
            if legal & bit(one):
                n = _add_pawn_moves(out, n, start, one, promote, tactical_only)
            two = one + forward
            if (start >> 3) == double_rank and sq[two] == EMPTY and legal & bit(two):
                out[n] = encode_move(start, two, 0)
                n += 1
        targets = PAWN_ATTACKS[us, start] & theirs & legal
        while targets:
            n = _add_pawn_moves(out, n, start, lsb(targets), promote, tactical_only)
            targets &= targets - _ONE
        if ep != NO_SQUARE and PAWN_ATTACKS[us, start] & bit(ep) and en_passant_is_safe(bb, us, king, start, ep,
                                                                                         occupied):
            out[n] = encode_move(start, ep, 0)
            n += 1
    return n


# ----------------------------------------------------------------------------------------------
# Make / unmake

@njit(cache=True, inline="always")
def _toggle(bb, sq, piece, square, empty_after):
    mask = bit(square)
    bb[piece] ^= mask
    bb[OCC_WHITE + piece // 6] ^= mask
    sq[square] = EMPTY if empty_after else piece


@njit(cache=True, inline="always")
def _push_record(st, undo, move, captured):
    """Write the undo record of ``move`` (what the position before it needs back) at row ``ST_PLY``."""
    record = undo[st[ST_PLY]]
    record[U_MOVE] = move
    record[U_CAPTURED] = captured
    record[U_CASTLING] = st[ST_CASTLING]
    record[U_EP] = st[ST_EP]
    record[U_HALFMOVE] = st[ST_HALFMOVE]


@njit(cache=True)
def make_move(bb, sq, st, keys, undo, move):
    """Play a legal ``move``: update every array, push an undo record, write the next key."""
    us = st[ST_SIDE]
    them = 1 - us
    start = move & 63
    end = (move >> 6) & 63
    promotion = move >> 12
    piece = np.int64(sq[start])
    captured = np.int64(sq[end])
    ply = st[ST_PLY]
    _push_record(st, undo, move, captured)

    key = keys[ply] ^ Z_WHITE ^ Z_CASTLING[st[ST_CASTLING]]
    old_ep = st[ST_EP]
    if old_ep != NO_SQUARE:
        key ^= Z_EP[old_ep & 7]
    halfmove = st[ST_HALFMOVE] + 1
    if captured != EMPTY:
        _toggle(bb, sq, captured, end, True)
        key ^= Z_PIECE[captured, end]
        halfmove = 0
    _toggle(bb, sq, piece, start, True)
    _toggle(bb, sq, piece, end, False)
    key ^= Z_PIECE[piece, start] ^ Z_PIECE[piece, end]
    new_ep = NO_SQUARE
    kind = piece - 6 * us
    if kind == PAWN:
        halfmove = 0
        if end == old_ep:
            taken = end - 8 if us == WHITE else end + 8
            pawn = 6 * them + PAWN
            _toggle(bb, sq, pawn, taken, True)
            key ^= Z_PIECE[pawn, taken]
        elif end - start == 16 or start - end == 16:
            middle = (start + end) >> 1
            if PAWN_ATTACKS[us, middle] & bb[6 * them + PAWN]:  # Polyglot: only if a pawn is ready
                new_ep = middle
                key ^= Z_EP[middle & 7]
        elif promotion:
            promoted = 6 * us + promotion
            _toggle(bb, sq, piece, end, True)
            _toggle(bb, sq, promoted, end, False)
            key ^= Z_PIECE[piece, end] ^ Z_PIECE[promoted, end]
    elif kind == KING and (end - start == 2 or start - end == 2):
        rook = 6 * us + ROOK
        rook_from = start + 3 if end > start else start - 4
        rook_to = start + 1 if end > start else start - 1
        _toggle(bb, sq, rook, rook_from, True)
        _toggle(bb, sq, rook, rook_to, False)
        key ^= Z_PIECE[rook, rook_from] ^ Z_PIECE[rook, rook_to]
    castling = st[ST_CASTLING] & CASTLING_KEEP[start] & CASTLING_KEEP[end]
    key ^= Z_CASTLING[castling]
    st[ST_SIDE] = them
    st[ST_CASTLING] = castling
    st[ST_EP] = new_ep
    st[ST_HALFMOVE] = halfmove
    st[ST_FULLMOVE] += us  # after Black's move
    st[ST_PLY] = ply + 1
    keys[ply + 1] = key


@njit(cache=True)
def unmake_move(bb, sq, st, undo):
    """Take back the last move ``make_move`` played (its record is on top of ``undo``)."""
    ply = st[ST_PLY] - 1
    record = undo[ply]
    move = record[U_MOVE]
    us = 1 - st[ST_SIDE]
    start = move & 63
    end = (move >> 6) & 63
    promotion = move >> 12
    piece = np.int64(sq[end])
    if promotion:
        _toggle(bb, sq, piece, end, True)
        piece = 6 * us + PAWN
        _toggle(bb, sq, piece, end, False)
    _toggle(bb, sq, piece, end, True)
    _toggle(bb, sq, piece, start, False)
    captured = np.int64(record[U_CAPTURED])
    if captured != EMPTY:
        _toggle(bb, sq, captured, end, False)
    kind = piece - 6 * us
    if kind == PAWN and end == record[U_EP]:
        taken = end - 8 if us == WHITE else end + 8
        _toggle(bb, sq, 6 * (1 - us) + PAWN, taken, False)
    elif kind == KING and (end - start == 2 or start - end == 2):
        rook = 6 * us + ROOK
        rook_from = start + 3 if end > start else start - 4
        rook_to = start + 1 if end > start else start - 1
        _toggle(bb, sq, rook, rook_to, True)
        _toggle(bb, sq, rook, rook_from, False)
    st[ST_SIDE] = us
    st[ST_CASTLING] = record[U_CASTLING]
    st[ST_EP] = record[U_EP]
    st[ST_HALFMOVE] = record[U_HALFMOVE]
    st[ST_FULLMOVE] -= us
    st[ST_PLY] = ply


@njit(cache=True)
def make_null(st, keys, undo):
    """Pass the move (null-move pruning). The clock is zeroed so no repetition spans the pass."""
    ply = st[ST_PLY]
    _push_record(st, undo, NO_MOVE, EMPTY)
    key = keys[ply] ^ Z_WHITE
    if st[ST_EP] != NO_SQUARE:
        key ^= Z_EP[st[ST_EP] & 7]
    st[ST_FULLMOVE] += st[ST_SIDE]
    st[ST_SIDE] = 1 - st[ST_SIDE]
    st[ST_EP] = NO_SQUARE
    st[ST_HALFMOVE] = 0
    st[ST_PLY] = ply + 1
    keys[ply + 1] = key


@njit(cache=True)
def unmake_null(st, undo):
    ply = st[ST_PLY] - 1
    record = undo[ply]
    st[ST_SIDE] = 1 - st[ST_SIDE]
    st[ST_FULLMOVE] -= st[ST_SIDE]
    st[ST_EP] = record[U_EP]
    st[ST_HALFMOVE] = record[U_HALFMOVE]
    st[ST_PLY] = ply


# ----------------------------------------------------------------------------------------------
# Keys and rules

@njit(cache=True)
def compute_key(bb, st):
    """The Zobrist key from scratch (the incremental one in ``keys`` must always equal it)."""
    key = _ZERO
    for piece in range(12):
        pieces = bb[piece]
        while pieces:
            key ^= Z_PIECE[piece, lsb(pieces)]
            pieces &= pieces - _ONE
    key ^= Z_CASTLING[st[ST_CASTLING]]
    if st[ST_EP] != NO_SQUARE:
        key ^= Z_EP[st[ST_EP] & 7]
    if st[ST_SIDE] == WHITE:
        key ^= Z_WHITE
    return key


@njit(cache=True, inline="always")
def _earlier_equal(st, keys, most):
    """How many earlier positions (since the last capture, pawn move or pass) equal this one, counted up
    to ``most`` (the search stops at the first)."""
    ply = st[ST_PLY]
    key = keys[ply]
    count = 0
    back = min(st[ST_HALFMOVE], ply)
    for i in range(4, back + 1, 2):
        if keys[ply - i] == key:
            count += 1
            if count >= most:
                break
    return count


@njit(cache=True)
def repetitions(st, keys):
    """How many earlier positions (since the last capture, pawn move or pass) equal this one."""
    return _earlier_equal(st, keys, HISTORY)


@njit(cache=True)
def is_repeated(st, keys):
    """Whether this position occurred before: the search scores a first repetition as a draw."""
    return _earlier_equal(st, keys, 1) > 0


@njit(cache=True)
def _insufficient_for(bb, colour):
    own = 6 * colour
    other = 6 * (1 - colour)
    ours = bb[OCC_WHITE + colour]
    if bb[own + PAWN] | bb[own + ROOK] | bb[own + QUEEN]:
        return False
    if bb[own + KNIGHT]:
        # A lone knight, and no enemy piece that could let it mate (selfmate) but the queen.
        return popcount(ours) <= 2 and not (bb[OCC_WHITE + 1 - colour] & ~bb[other + KING] & ~bb[other + QUEEN])
    if bb[own + BISHOP]:
        bishops = bb[BISHOP] | bb[6 + BISHOP]
        same_colour = not (bishops & _DARK) or not (bishops & _LIGHT)
        return same_colour and not (bb[PAWN] | bb[6 + PAWN]) and not (bb[KNIGHT] | bb[6 + KNIGHT])
    return True


@njit(cache=True)
def insufficient_material(bb):
    """Neither side can mate: python-chess's ``is_insufficient_material``, rule for rule."""
    return _insufficient_for(bb, WHITE) and _insufficient_for(bb, BLACK)


@njit(cache=True)
def non_pawn_pieces(bb, colour):
    """How many knights, bishops, rooks and queens ``colour`` has (null moves need some)."""
    own = 6 * colour
    return popcount(bb[own + KNIGHT] | bb[own + BISHOP] | bb[own + ROOK] | bb[own + QUEEN])


# ----------------------------------------------------------------------------------------------
# Perft

@njit(cache=True)
def perft(bb, sq, st, keys, undo, moves, depth):
    """Leaf count of the legal move tree to ``depth``; ``moves`` is scratch, [>= depth, MAX_MOVES]
    int32. The last ply is counted, not played (bulk counting)."""
    n = generate_moves(bb, sq, st, moves[depth - 1], False)
    if depth == 1:
        return n
    total = 0
    for i in range(n):
        make_move(bb, sq, st, keys, undo, moves[depth - 1, i])
        total += perft(bb, sq, st, keys, undo, moves, depth - 1)
        unmake_move(bb, sq, st, undo)
    return total


@njit(cache=True)
def perft_full(bb, sq, st, keys, undo, moves, depth):
    """Like ``perft`` but every leaf is made and unmade too (the cost a search pays per node)."""
    if depth == 0:
        return 1
    n = generate_moves(bb, sq, st, moves[depth - 1], False)
    total = 0
    for i in range(n):
        make_move(bb, sq, st, keys, undo, moves[depth - 1, i])
        total += perft_full(bb, sq, st, keys, undo, moves, depth - 1)
        unmake_move(bb, sq, st, undo)
    return total
