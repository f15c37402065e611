"""FENs parsed in compiled code onto the kernel's arrays, many at a time, without python-chess.

Owns ``parse_fen``: the board, side to move and en-passant fields of one FEN, read from bytes
(``text[start:end]``, uint8) into ``alphazero.board.kernel``'s ``bb`` [14] uint64, ``sq`` [64] int8 and
``st`` [6] int64 (``ST_SIDE`` and ``ST_EP`` set, the other scalars 0; no key, no history), checking the
bounds every position the kernel holds keeps; and ``pack_fens``, the Python edge that lays many FENs
out as one byte buffer with offsets for a compiled loop over them. The castling field is skipped and
the clocks are not read: this parser serves what needs the pieces only (the NNUE feature batches of
``alphazero.nets.features``); a position to play from comes from ``Position.from_fen``. About a
microsecond a FEN. Knows nothing of search, networks or torch.

``@njit(cache=True)``; numba checks a cache entry against its own source file only, so after editing
``kernel.py`` or ``bits.py`` delete this module's cache too (``alphazero/board/__pycache__/fen*``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from numba import njit

from alphazero.board.bits import popcount
from alphazero.board.kernel import BLACK, EMPTY, KING, NO_SQUARE, OCC_WHITE, PAWN, ST_EP, ST_SIDE, ST_SIZE, WHITE

_ONE = np.uint64(1)


def _build_piece_codes() -> np.ndarray:
    """``[128] int64``: the kernel's piece code of each FEN piece letter (ASCII), -1 for other bytes."""
    codes = np.full(128, -1, np.int64)
    for code, letter in enumerate("PNBRQKpnbrqk"):
        codes[ord(letter)] = code
    return codes


_PIECE_CODE = _build_piece_codes()


@njit(cache=True)
def parse_fen(text, start, end, bb, sq, st):
    """Fill ``bb``/``sq``/``st`` (side and en-passant square only) from the FEN in ``text[start:end]``
    (uint8). Returns False for a FEN that does not parse or breaks the kernel's bounds: 8 ranks of 8
    squares, one king a side, at most 16 pieces and 8 pawns a side, no pawn on a back rank, an
    en-passant square just behind a pawn that could have pushed two."""
    for i in range(14):
        bb[i] = 0
    for i in range(64):
        sq[i] = EMPTY
    for i in range(ST_SIZE):
        st[i] = 0
    rank = 7
    file = 0
    i = start
    while i < end and text[i] != 32:
        c = text[i]
        i += 1
        if c == 47:  # '/'
            if file != 8 or rank == 0:
                return False
            rank -= 1
            file = 0
        elif 49 <= c <= 56:  # '1'..'8'
            file += c - 48
            if file > 8:
                return False
        else:
            code = _PIECE_CODE[c] if c < 128 else -1
            if code < 0 or file >= 8:
                return False
            square = 8 * rank + file
            sq[square] = code
            bit = _ONE << np.uint64(square)
            bb[code] |= bit
            bb[OCC_WHITE + code // 6] |= bit
            file += 1
    if rank != 0 or file != 8 or i + 1 == end or (i + 2 < end and text[i + 2] != 32):
        return False
    side = text[i + 1] if i < end else 119  # python-chess takes a bare board as White to move
    if side == 119:  # 'w'
        st[ST_SIDE] = WHITE
    elif side == 98:  # 'b'
        st[ST_SIDE] = BLACK
    else:
        return False
    i += 3
    while i < end and text[i] != 32:  # castling rights (optional): not read
        i += 1
    i += 1
    st[ST_EP] = NO_SQUARE
    if i < end and text[i] != 45:  # an en-passant square (optional), not '-'
        if i + 1 >= end or not (97 <= text[i] <= 104) or not (49 <= text[i + 1] <= 56):
            return False
        ep = 8 * (np.int64(text[i + 1]) - 49) + (np.int64(text[i]) - 97)
        us = st[ST_SIDE]
        pushed = ep - 8 if us == WHITE else ep + 8  # the pawn that moved two
        origin = ep + 8 if us == WHITE else ep - 8
        if (ep >> 3) != (5 if us == WHITE else 2) or sq[ep] != EMPTY or sq[origin] != EMPTY \
                or sq[pushed] != 6 * (1 - us) + PAWN:
            return False
        st[ST_EP] = ep
    back_ranks = np.uint64(0xFF000000000000FF)
    for colour in range(2):
        if popcount(bb[6 * colour + KING]) != 1 or popcount(bb[OCC_WHITE + colour]) > 16 \
                or popcount(bb[6 * colour + PAWN]) > 8 or bb[6 * colour + PAWN] & back_ranks:
            return False
    return True


def pack_fens(fens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(text, starts)``: the FENs (stripped, non-ASCII bytes as '?') one after another as ``uint8 [T]``
    and ``int64 [len(fens) + 1]`` offsets, FEN i being ``text[starts[i]:starts[i + 1]]``."""
    encoded = [fen.strip().encode("ascii", "replace") for fen in fens]
    lengths = np.fromiter((len(e) for e in encoded), np.int64, count=len(encoded))
    starts = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum(lengths, out=starts[1:])
    text = np.frombuffer(b"".join(encoded), np.uint8) if encoded else np.zeros(0, np.uint8)
    return text, starts
