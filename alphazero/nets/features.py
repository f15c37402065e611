"""NNUE input feature sets: which sparse binary features a position turns on, from either side's view.

Owns the feature blocks below, their index conventions, the spec strings that name a set of them
(``"all"``, ``"all+pv"``), a slow python-chess reference (the oracle), the compiled extraction that a
search calls at every evaluated node, and a batch extractor for training data. Knows nothing of
networks, torch or search; imports only numpy, numba, python-chess and ``alphazero.board``.

Perspective
===========
Features are always computed from one perspective ``p``: 0 the side to move, 1 the opponent; ``c``
is that side's colour. The board is seen from ``c``: square ``s`` (python-chess numbering, a1 = 0)
becomes the *relative* square ``s`` for White and ``s ^ 56`` (the vertical mirror) for Black, so
``c``'s pieces always start at the bottom; a piece is *friendly* (relative colour 0) if it is
``c``'s, else *enemy* (1); its role is the piece type 0..5 (P N B R Q K). ``k = 6 * rel_colour +
role`` (0..11) names a (colour, role) pair below; file, rank and square are those of the relative
board. A position and its mirror with colours swapped (``board.mirror()``) have the same features
for the same perspective.

Blocks
======
===== ====== ================================================================== ============ ========
block size   index (active when ...)                                             active mean  thesis
===== ====== ================================================================== ============ ========
all   768    ``64 * k + square``: a piece k on that square                       20.50        14.68
ka    49152  ``768 * own_king_square + all-index``: HalfKA (all, per king square) 20.50        (n/a)
kb    3072   ``768 * KING_BUCKETS[own_king_square] + all-index``: all, per one of 20.50        (n/a)
             four king buckets (below)
h     96     ``8 * k + file``: some piece k on that file                         19.94        14.68
v     96     ``8 * k + rank``: some piece k on that rank                         14.39        14.68
d1    180    ``15 * k + (file - rank + 7)``: some piece k on that diagonal       18.85        14.68
d2    180    ``15 * k + (file + rank)``: some piece k on that anti-diagonal      18.85        14.68
ph    1152   ``144 * rank + 12 * k1 + k2``: piece k1 on a square, k2 on the      5.82         8.23
             square just right of it (file + 1)
pv    1152   ``144 * file + 12 * k1 + k2``: piece k1 on a square, k2 on the      5.51         8.30
             square just above it (rank + 1)
mb    768    ``64 * k + square``: some piece k has a pseudo-legal move there     57.26        48.93
mc    206    ``MC_OFFSETS[k] + min(moves, MC_CAPS[k])``: how many pseudo-legal   12.00        12.00
             moves the pieces k have together, capped (one feature per k)
===== ====== ================================================================== ============ ========

Active means are per position and perspective over the 3000 positions of
``/work/shared/data/evals-dev.csv`` (``python -m alphazero.nets.features CSV [SPEC ...]`` prints them);
"thesis" is Lombardo's table (feature-set analysis for chess NNUE, 2024). Two things differ. Its
positions hold fewer pieces (``all`` counts pieces: 14.68 there, 20.50 here). And its code
(``mlomb/cs-master-thesis``) emits one index per piece *with repeats* (two pawns on one rank give
the same ``v`` index twice, summed by the embedding: h, v, d1, d2 all equal ``all``), pairs each piece
with the *nearest occupied* square along the rank or file rather than the adjacent square, and moves
pawns only diagonally, onto empty or enemy squares. Counted that way on our positions: h/v/d1/d2
20.50, ph 13.21, pv 13.05, mb 59.61. Here, as the project's plan defines them, every block is a set
(sorted, no repeats), pairs are of adjacent squares, and pawns make their pseudo-legal moves.

Pseudo-legal moves (``mb``, ``mc``): knights, bishops, rooks, queens and kings to every square they
attack (sliders stop at the first piece) that no piece of their own colour holds; pawns one square
forward to an empty square, two from their start rank through an empty square to an empty one, and
diagonally onto an enemy piece or, for the side to move only, onto the en-passant square. Castling is
not counted; pins and checks are ignored; a promotion counts once per target square. ``mc``'s caps
per role are pawn 8, knight 15, bishop 16, rook 25, queen 25, king 8 (103 indices per colour).

Sums: ``"all+pv"`` concatenates blocks in the order written, each block's indices shifted by the sizes
of the blocks before it (``FeatureSet.offsets``). The canonical spec is lower case, joined by "+".

Compiled extraction
===================
``active_features(bb, sq, st, block_ids, block_offsets, perspective, out) -> n`` reads the kernel's
arrays (``alphazero.board.kernel``: ``bb`` [14] uint64, ``sq`` [64] int8, ``st`` [6] int64) and writes
the perspective's active indices, sorted ascending and unique, into ``out[:n]`` (``out``: int32
[>= FeatureSet.max_active]); it allocates nothing. ``block_ids``/``block_offsets`` are
``FeatureSet.block_ids``/``block_offsets`` (int64 [B]). ``max_active`` is a proven bound for any
position the kernel accepts (at most 16 pieces and 8 pawns a side, one king each, no pawn on a back
rank): never size ``out`` smaller. Cost per perspective, measured on the evals-dev positions on a
loaded two-core machine (so upper bounds): ``all`` 0.2-0.25 us, ``all+pv`` about 0.5 us, ``mb`` or ``mc``
about 1 us, all ten blocks but ``ka`` together about 4 us. Each block's indices come out already sorted
(pairs by a short insertion sort per rank or file), so a search can diff a parent's and a child's lists
by a merge. ``@njit(cache=True)``; Numba checks a cache entry against its own
source file only, so after editing ``alphazero/board/kernel.py``, ``bits.py`` or ``fen.py`` delete
``alphazero/nets/__pycache__/features*`` too.

``batch_features(fens_or_boards, fs) -> FeatureBatch`` does both perspectives of many positions in
compiled code (FENs are parsed there by ``alphazero.board.fen``, without python-chess) into CSR arrays, what
``torch.nn.EmbeddingBag(mode="sum")`` takes: ``stm_index`` int32 [T] with ``stm_offsets`` int64
[P + 1] (position i's features are ``stm_index[stm_offsets[i]:stm_offsets[i + 1]]``), the same for
``nstm_*``. About 6 s for a million FENs with ``all`` or ``all+pv`` (28 s with every block), the same
loaded machine.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Iterable

import chess
import numpy as np
from numba import njit

from alphazero.board.bits import lsb, popcount
from alphazero.board.fen import pack_fens, parse_fen
from alphazero.board.kernel import (
    BLACK,
    EMPTY,
    KING,
    KING_ATTACKS,
    KNIGHT,
    KNIGHT_ATTACKS,
    NO_SQUARE,
    OCC_BLACK,
    OCC_WHITE,
    PAWN,
    QUEEN,
    ROOK,
    ST_EP,
    ST_SIDE,
    ST_SIZE,
    WHITE,
    bishop_attacks,
    rook_attacks,
)
from alphazero.board.position import Position
from alphazero.errors import InputError

# Block name -> number of features; the order is also the compiled code's block id.
BLOCK_SIZES: dict[str, int] = {
    "all": 768,
    "ka": 64 * 768,
    "h": 96,
    "v": 96,
    "d1": 180,
    "d2": 180,
    "ph": 1152,
    "pv": 1152,
    "mb": 768,
    "mc": 206,
    "kb": 4 * 768,
}
BLOCK_NAMES: tuple[str, ...] = tuple(BLOCK_SIZES)
ALL, KA, H, V, D1, D2, PH, PV, MB, MC, KB = range(len(BLOCK_NAMES))

# The king blocks' bucket of the perspective's own king, by its relative square (a1 = 0): ``ka`` one
# bucket a square (HalfKA), ``kb`` four, as engines trained with bullet take a few rather than 64 (HalfKA
# split 6.8M positions 64 ways and overfit, docs/RESULTS.md): the king on its first two ranks castled
# long (files a-c), in the centre (d, e) or castled short (f-h), and the king anywhere further up (the
# endgame's king).
_KB = np.array([3 if square // 8 >= 2 else 0 if square % 8 <= 2 else 1 if square % 8 <= 4 else 2
                for square in range(64)], np.int64)
KING_BUCKETS = np.stack([np.arange(64, dtype=np.int64), _KB])  # [2, 64]: row 0 ka's, row 1 kb's

# Most active features one perspective can have, for positions with at most 16 pieces and 8 pawns a
# side and one king each (what the kernel and Position accept):
# - all, ka, kb: one per piece (32). h, v, d1, d2: one per piece at most (pieces sharing a line share it).
# - ph, pv: one per pair, and each piece is the left (lower) member of at most one pair: < 32.
# - mc: exactly 12.
# - mb: per colour, each non-king, non-pawn role reaches at most the 63 squares its king does not hold
#   (4 * 63), the king at most 8, at most 8 pawns at most 4 targets each (32): 292 a colour, 584.
BLOCK_MAX_ACTIVE: dict[str, int] = {
    "all": 32, "ka": 32, "h": 32, "v": 32, "d1": 32, "d2": 32, "ph": 32, "pv": 32, "mb": 584, "mc": 12,
    "kb": 32,
}

# mc: per role (P N B R Q K) the largest count kept (larger counts share the top index), and the first
# index of each (relative colour, role) pair, friendly pieces first.
MC_ROLE_CAPS = np.array([8, 15, 16, 25, 25, 8], np.int64)
MC_CAPS = np.concatenate([MC_ROLE_CAPS, MC_ROLE_CAPS])  # [12] by k
MC_OFFSETS = np.concatenate([[0], np.cumsum(MC_CAPS + 1)[:-1]]).astype(np.int64)  # [12] by k
assert int(MC_OFFSETS[-1] + MC_CAPS[-1] + 1) == BLOCK_SIZES["mc"]


@dataclass(frozen=True)
class FeatureSet:
    """A parsed feature spec: its blocks in order, where each starts, and arrays for compiled code."""

    spec: str  # canonical, e.g. "all+pv"
    blocks: tuple[str, ...]
    offsets: tuple[int, ...]  # first index of each block
    size: int  # total number of features
    max_active: int  # bound on active features per perspective (size ``out`` by it)
    block_ids: np.ndarray  # int64 [len(blocks)]: BLOCK_NAMES index of each block
    block_offsets: np.ndarray  # int64 [len(blocks)]: ``offsets`` as an array

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FeatureSet) and other.spec == self.spec

    def __hash__(self) -> int:
        return hash(self.spec)


def parse_features(spec: str) -> FeatureSet:
    """``"all+pv"`` -> its ``FeatureSet``; ``InputError`` naming the problem for a spec that does not parse
    (empty, an unknown block, a block given twice). Case and spaces around the names are ignored."""
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(f"feature set {spec!r}: empty (give blocks joined by '+', e.g. 'all+pv'; known: {', '.join(BLOCK_NAMES)})")
    names = [name.strip().lower() for name in spec.split("+")]
    seen: list[str] = []
    for name in names:
        if not name:
            raise InputError(f"feature set {spec!r}: empty block name (blocks are joined by '+', e.g. 'all+pv')")
        if name not in BLOCK_SIZES:
            raise InputError(f"feature set {spec!r}: unknown block {name!r} (known: {', '.join(BLOCK_NAMES)})")
        if name in seen:
            raise InputError(f"feature set {spec!r}: block {name!r} given twice")
        seen.append(name)
    if "ka" in seen and "kb" in seen:
        raise InputError(f"feature set {spec!r}: one king block (ka or kb), not both")
    offsets = [0]
    for name in seen[:-1]:
        offsets.append(offsets[-1] + BLOCK_SIZES[name])
    return FeatureSet(
        spec="+".join(seen),
        blocks=tuple(seen),
        offsets=tuple(offsets),
        size=sum(BLOCK_SIZES[name] for name in seen),
        max_active=sum(BLOCK_MAX_ACTIVE[name] for name in seen),
        block_ids=np.array([BLOCK_NAMES.index(name) for name in seen], np.int64),
        block_offsets=np.array(offsets, np.int64),
    )


# ----------------------------------------------------------------------------------------------
# The reference: python-chess only, slow (about a millisecond a position), written to be read.

def _reference_moves(board: chess.Board, square: int) -> list[int]:
    """Pseudo-legal target squares of the piece on ``square`` (the module docstring's definition)."""
    piece = board.piece_at(square)
    assert piece is not None
    own = board.occupied_co[piece.color]
    enemy = board.occupied_co[not piece.color]
    if piece.piece_type != chess.PAWN:
        return [target for target in board.attacks(square) if not own & chess.BB_SQUARES[target]]
    targets = []
    step = 8 if piece.color == chess.WHITE else -8
    start_rank = 1 if piece.color == chess.WHITE else 6
    one = square + step
    if 0 <= one < 64 and board.piece_at(one) is None:
        targets.append(one)
        two = one + step
        if chess.square_rank(square) == start_rank and board.piece_at(two) is None:
            targets.append(two)
    for target in chess.SquareSet(chess.BB_PAWN_ATTACKS[piece.color][square]):
        if enemy & chess.BB_SQUARES[target]:
            targets.append(target)
        elif target == board.ep_square and piece.color == board.turn:
            targets.append(target)
    return targets


def _reference_block(board: chess.Board, name: str, colour: chess.Color) -> set[int]:
    """The active indices (from 0) of one block, seen by ``colour``."""

    def relative(square: int) -> int:
        return square if colour == chess.WHITE else square ^ 56

    def kind(piece: chess.Piece) -> int:  # k = 6 * relative colour + role
        return 6 * (0 if piece.color == colour else 1) + piece.piece_type - 1

    pieces = {relative(square): kind(piece) for square, piece in board.piece_map().items()}  # relative square -> k
    active: set[int] = set()
    if name in ("all", "ka", "kb"):
        king = board.king(colour)
        assert king is not None
        base = 768 * int(KING_BUCKETS[int(name == "kb"), relative(king)]) if name != "all" else 0
        active = {base + 64 * k + square for square, k in pieces.items()}
    elif name == "h":
        active = {8 * k + chess.square_file(square) for square, k in pieces.items()}
    elif name == "v":
        active = {8 * k + chess.square_rank(square) for square, k in pieces.items()}
    elif name == "d1":
        active = {15 * k + chess.square_file(square) - chess.square_rank(square) + 7 for square, k in pieces.items()}
    elif name == "d2":
        active = {15 * k + chess.square_file(square) + chess.square_rank(square) for square, k in pieces.items()}
    elif name == "ph":
        for square, k in pieces.items():
            right = square + 1
            if chess.square_file(square) < 7 and right in pieces:
                active.add(144 * chess.square_rank(square) + 12 * k + pieces[right])
    elif name == "pv":
        for square, k in pieces.items():
            above = square + 8
            if chess.square_rank(square) < 7 and above in pieces:
                active.add(144 * chess.square_file(square) + 12 * k + pieces[above])
    elif name in ("mb", "mc"):
        counts = [0] * 12
        for square, piece in board.piece_map().items():
            targets = _reference_moves(board, square)
            counts[kind(piece)] += len(targets)
            active |= {64 * kind(piece) + relative(target) for target in targets}
        if name == "mc":
            active = {int(MC_OFFSETS[k]) + min(counts[k], int(MC_CAPS[k])) for k in range(12)}
    else:
        raise InputError(f"unknown feature block {name!r}")
    return active


def reference_features(board: chess.Board, fs: FeatureSet) -> tuple[list[int], list[int]]:
    """Sorted active indices of ``fs`` for (the side to move, the opponent), with python-chess only.

    Slow (about a millisecond); the oracle the compiled ``active_features`` is tested against."""
    result = []
    for colour in (board.turn, not board.turn):
        indices: set[int] = set()
        for name, offset in zip(fs.blocks, fs.offsets):
            indices |= {offset + index for index in _reference_block(board, name, colour)}
        result.append(sorted(indices))
    return result[0], result[1]


# ----------------------------------------------------------------------------------------------
# Compiled extraction on the kernel's arrays.

_ONE = np.uint64(1)
_BYTE = np.uint64(0xFF)
_FILE_A = np.uint64(0x0101010101010101)
_FILE_H = np.uint64(0x8080808080808080)
_NOT_FILE_H = ~_FILE_H
_RANK_3 = np.uint64(0x0000000000FF0000)
_RANK_6 = np.uint64(0x0000FF0000000000)
_SWAP_8 = np.uint64(0x00FF00FF00FF00FF)
_SWAP_16 = np.uint64(0x0000FFFF0000FFFF)
_S8, _S16, _S32 = np.uint64(8), np.uint64(16), np.uint64(32)


@njit(cache=True, inline="always")
def _mirror(bits):
    """The bitboard seen from Black (rank r -> 7 - r): a byte swap."""
    bits = ((bits >> _S8) & _SWAP_8) | ((bits & _SWAP_8) << _S8)
    bits = ((bits >> _S16) & _SWAP_16) | ((bits & _SWAP_16) << _S16)
    return (bits >> _S32) | (bits << _S32)


@njit(cache=True, inline="always")
def _relative_bits(bb, k, colour):
    """Relative squares of the pieces ``k`` (6 * relative colour + role) seen by ``colour``."""
    bits = bb[6 * ((k // 6) ^ colour) + k % 6]
    if colour == BLACK:
        bits = _mirror(bits)
    return bits


@njit(cache=True, inline="always")
def _emit_bits(out, n, base, bits):
    """Append ``base + square`` for each set bit of ``bits``, lowest first; returns the new end."""
    while bits:
        out[n] = base + lsb(bits)
        n += 1
        bits &= bits - _ONE
    return n


@njit(cache=True, inline="always")
def _insert(out, start, n, value):
    """Insert ``value`` into the sorted ``out[start:n]`` unless there; returns the new end."""
    j = n
    while j > start and out[j - 1] > value:
        j -= 1
    if j > start and out[j - 1] == value:
        return n
    i = n
    while i > j:
        out[i] = out[i - 1]
        i -= 1
    out[j] = value
    return n + 1


@njit(cache=True)
def _squares_block(bb, colour, offset, out, n):
    """``all`` (``offset`` includes ``ka``'s or ``kb``'s king base): ``64 * k + square``."""
    for k in range(12):
        n = _emit_bits(out, n, offset + 64 * k, _relative_bits(bb, k, colour))
    return n


@njit(cache=True)
def _files_block(bb, colour, offset, out, n):
    for k in range(12):
        bits = bb[6 * ((k // 6) ^ colour) + k % 6]  # files do not change under the mirror
        bits |= bits >> _S32
        bits |= bits >> _S16
        bits |= bits >> _S8
        n = _emit_bits(out, n, offset + 8 * k, bits & _BYTE)
    return n


@njit(cache=True)
def _ranks_block(bb, colour, offset, out, n):
    for k in range(12):
        bits = _relative_bits(bb, k, colour)
        base = offset + 8 * k
        for rank in range(8):
            if (bits >> np.uint64(8 * rank)) & _BYTE:
                out[n] = base + rank
                n += 1
    return n


@njit(cache=True)
def _diagonals_block(bb, colour, offset, out, n, anti):
    for k in range(12):
        bits = _relative_bits(bb, k, colour)
        lines = np.uint64(0)
        while bits:
            square = lsb(bits)
            bits &= bits - _ONE
            if anti:
                lines |= _ONE << np.uint64((square & 7) + (square >> 3))
            else:
                lines |= _ONE << np.uint64((square & 7) - (square >> 3) + 7)
        n = _emit_bits(out, n, offset + 15 * k, lines)
    return n


@njit(cache=True, inline="always")
def _kind_at(sq, relative_square, colour, flip):
    """k (6 * relative colour + role) of the piece on a relative square (which must hold one)."""
    code = np.int64(sq[relative_square ^ flip])
    return 6 * ((code // 6) ^ colour) + code % 6


@njit(cache=True)
def _pairs_block(bb, sq, colour, offset, out, n, vertical):
    """``ph`` (pairs side by side, by rank) or ``pv`` (one above the other, by file)."""
    occupied = bb[OCC_WHITE] | bb[OCC_BLACK]
    flip = 0
    if colour == BLACK:
        occupied = _mirror(occupied)
        flip = 56
    if vertical:
        lower = occupied & (occupied >> _S8)  # squares with a piece on the square above
        for file in range(8):
            pairs = lower & (_FILE_A << np.uint64(file))
            start = n
            while pairs:
                square = lsb(pairs)
                pairs &= pairs - _ONE
                value = offset + 144 * file + 12 * _kind_at(sq, square, colour, flip) + _kind_at(sq, square + 8, colour, flip)
                n = _insert(out, start, n, value)
    else:
        left = occupied & (occupied >> _ONE) & _NOT_FILE_H  # squares with a piece just right of them
        for rank in range(8):
            pairs = left & (_BYTE << np.uint64(8 * rank))
            start = n
            while pairs:
                square = lsb(pairs)
                pairs &= pairs - _ONE
                value = offset + 144 * rank + 12 * _kind_at(sq, square, colour, flip) + _kind_at(sq, square + 1, colour, flip)
                n = _insert(out, start, n, value)
    return n


@njit(cache=True)
def _role_moves(bb, st, side, role):
    """(target squares, number of moves) of ``side``'s pieces of ``role``, absolute squares."""
    own = bb[OCC_WHITE + side]
    enemy = bb[OCC_WHITE + 1 - side]
    occupied = own | enemy
    pieces = bb[6 * side + role]
    union = np.uint64(0)
    count = 0
    if role == PAWN:
        empty = ~occupied
        takes = enemy
        ep = st[ST_EP]
        if ep != NO_SQUARE and side == st[ST_SIDE]:
            takes |= _ONE << np.uint64(ep)
        if side == WHITE:
            single = (pieces << _S8) & empty
            double = ((single & _RANK_3) << _S8) & empty
            left = ((pieces & ~_FILE_A) << np.uint64(7)) & takes
            right = ((pieces & ~_FILE_H) << np.uint64(9)) & takes
        else:
            single = (pieces >> _S8) & empty
            double = ((single & _RANK_6) >> _S8) & empty
            left = ((pieces & ~_FILE_A) >> np.uint64(9)) & takes
            right = ((pieces & ~_FILE_H) >> np.uint64(7)) & takes
        union = single | double | left | right
        count = popcount(single) + popcount(double) + popcount(left) + popcount(right)
        return union, count
    while pieces:
        square = lsb(pieces)
        pieces &= pieces - _ONE
        if role == KNIGHT:
            targets = KNIGHT_ATTACKS[square]
        elif role == KING:
            targets = KING_ATTACKS[square]
        elif role == QUEEN:
            targets = rook_attacks(square, occupied) | bishop_attacks(square, occupied)
        elif role == ROOK:
            targets = rook_attacks(square, occupied)
        else:
            targets = bishop_attacks(square, occupied)
        targets &= ~own
        union |= targets
        count += popcount(targets)
    return union, count


@njit(cache=True)
def _mobility_block(bb, st, colour, offset, out, n, counts):
    """``mb`` (target squares per k) or, with ``counts``, ``mc`` (capped move counts per k)."""
    for k in range(12):
        union, count = _role_moves(bb, st, (k // 6) ^ colour, k % 6)
        if counts:
            out[n] = offset + MC_OFFSETS[k] + min(count, MC_CAPS[k])
            n += 1
        else:
            if colour == BLACK:
                union = _mirror(union)
            n = _emit_bits(out, n, offset + 64 * k, union)
    return n


@njit(cache=True)
def active_features(bb, sq, st, block_ids, block_offsets, perspective, out):
    """Write the active indices of one perspective (0 side to move, 1 opponent) into ``out`` (int32
    [>= max_active]), sorted ascending and unique; returns how many. Allocates nothing."""
    colour = st[ST_SIDE] ^ perspective
    n = 0
    for b in range(block_ids.shape[0]):
        block = block_ids[b]
        offset = block_offsets[b]
        if block == ALL:
            n = _squares_block(bb, colour, offset, out, n)
        elif block == KA or block == KB:
            king = lsb(bb[6 * colour + KING])
            if colour == BLACK:
                king ^= 56
            n = _squares_block(bb, colour, offset + 768 * KING_BUCKETS[np.int64(block == KB), king], out, n)
        elif block == H:
            n = _files_block(bb, colour, offset, out, n)
        elif block == V:
            n = _ranks_block(bb, colour, offset, out, n)
        elif block == D1:
            n = _diagonals_block(bb, colour, offset, out, n, False)
        elif block == D2:
            n = _diagonals_block(bb, colour, offset, out, n, True)
        elif block == PH:
            n = _pairs_block(bb, sq, colour, offset, out, n, False)
        elif block == PV:
            n = _pairs_block(bb, sq, colour, offset, out, n, True)
        elif block == MB:
            n = _mobility_block(bb, st, colour, offset, out, n, False)
        elif block == MC:
            n = _mobility_block(bb, st, colour, offset, out, n, True)
    return n


# ----------------------------------------------------------------------------------------------
# The batch extractor, over FENs parsed in compiled code (``alphazero.board.fen``).

@njit(cache=True)
def _batch_from_fens(text, starts, first, last, block_ids, block_offsets, max_active,
                     stm_index, stm_counts, nstm_index, nstm_counts):
    """Features of FENs ``first..last-1`` (``text[starts[i]:starts[i + 1]]``), both perspectives,
    appended to ``*_index``; counts per position into ``*_counts[i - first]``. Returns -1, or the
    first FEN that does not parse (nothing after it is written)."""
    bb = np.zeros(14, np.uint64)
    sq = np.full(64, EMPTY, np.int8)
    st = np.zeros(ST_SIZE, np.int64)
    scratch = np.zeros(max_active, np.int32)
    ns = 0
    nn = 0
    for i in range(first, last):
        if not parse_fen(text, starts[i], starts[i + 1], bb, sq, st):
            return i, ns, nn
        k = active_features(bb, sq, st, block_ids, block_offsets, 0, scratch)
        stm_index[ns:ns + k] = scratch[:k]
        stm_counts[i - first] = k
        ns += k
        k = active_features(bb, sq, st, block_ids, block_offsets, 1, scratch)
        nstm_index[nn:nn + k] = scratch[:k]
        nstm_counts[i - first] = k
        nn += k
    return -1, ns, nn


@dataclass(frozen=True)
class FeatureBatch:
    """Both perspectives' active features of P positions, CSR (``torch.nn.EmbeddingBag`` inputs)."""

    stm_index: np.ndarray  # int32 [T]: side-to-move indices, position after position
    stm_offsets: np.ndarray  # int64 [P + 1]: position i is stm_index[stm_offsets[i]:stm_offsets[i + 1]]
    nstm_index: np.ndarray  # int32 [T']: the opponent's
    nstm_offsets: np.ndarray  # int64 [P + 1]

    def __len__(self) -> int:
        return len(self.stm_offsets) - 1

    def position(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(stm indices, nstm indices) of position ``i``."""
        return (self.stm_index[self.stm_offsets[i]:self.stm_offsets[i + 1]],
                self.nstm_index[self.nstm_offsets[i]:self.nstm_offsets[i + 1]])


def _fen_of(item: str | chess.Board) -> str:
    if isinstance(item, chess.Board):
        return item.fen(en_passant="xfen")  # the square whenever a pawn of the side to move stands ready
    if isinstance(item, str):
        return item
    raise InputError(f"batch_features: expected a FEN string or a chess.Board, got {type(item).__name__}")


def _bad_fen_error(fen: str) -> InputError:
    """The message for a FEN the compiled parser refused: python-chess's reason where it has one."""
    try:
        Position.from_fen(fen)
    except ValueError as error:
        return InputError(str(error))
    return InputError(f"illegal FEN {fen!r}: does not parse as 'board side [castling [en-passant ...]]'")


def batch_features(fens_or_boards: Iterable[str | chess.Board], fs: FeatureSet, chunk: int = 0) -> FeatureBatch:
    """Active features of every position, both perspectives, as CSR arrays (see ``FeatureBatch``).

    FENs are parsed in compiled code (boards go through ``board.fen()``): about a microsecond a
    position for ``all``. ``InputError`` names the first FEN that does not parse or has more pieces
    than chess allows. ``chunk`` (positions per compiled call) is for tests; 0 picks one."""
    fens = [_fen_of(item) for item in fens_or_boards]
    num = len(fens)
    text, starts = pack_fens(fens)
    if chunk <= 0:
        chunk = max(256, (1 << 22) // fs.max_active)
    stm_parts, nstm_parts = [], []
    stm_counts = np.zeros(num, np.int64)
    nstm_counts = np.zeros(num, np.int64)
    stm_buffer = np.empty(min(chunk, max(num, 1)) * fs.max_active, np.int32)
    nstm_buffer = np.empty_like(stm_buffer)
    for first in range(0, num, chunk):
        last = min(num, first + chunk)
        bad, ns, nn = _batch_from_fens(text, starts, first, last, fs.block_ids, fs.block_offsets, fs.max_active,
                                       stm_buffer, stm_counts[first:last], nstm_buffer, nstm_counts[first:last])
        if bad >= 0:
            raise _bad_fen_error(fens[bad])
        stm_parts.append(stm_buffer[:ns].copy())
        nstm_parts.append(nstm_buffer[:nn].copy())
    stm_offsets = np.zeros(num + 1, np.int64)
    nstm_offsets = np.zeros(num + 1, np.int64)
    np.cumsum(stm_counts, out=stm_offsets[1:])
    np.cumsum(nstm_counts, out=nstm_offsets[1:])
    empty = np.zeros(0, np.int32)
    return FeatureBatch(
        stm_index=np.concatenate(stm_parts) if stm_parts else empty,
        stm_offsets=stm_offsets,
        nstm_index=np.concatenate(nstm_parts) if nstm_parts else empty,
        nstm_offsets=nstm_offsets,
    )


def _main(argv: list[str]) -> None:
    """``python -m alphazero.nets.features CSV [SPEC...]``: mean active features per position and
    perspective over the CSV's ``fen`` column (the docstring's table)."""
    import csv

    path = argv[0] if argv else "/work/shared/data/evals-dev.csv"
    with open(path, newline="") as handle:
        fens = [row["fen"] for row in csv.DictReader(handle)]
    for spec in argv[1:] or list(BLOCK_NAMES):
        batch = batch_features(fens, parse_features(spec))
        both = (len(batch.stm_index) + len(batch.nstm_index)) / (2 * len(batch))
        print(f"{spec:8s} {both:7.2f} active per position and perspective ({len(batch)} positions)")


if __name__ == "__main__":
    _main(sys.argv[1:])
