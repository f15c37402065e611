"""Compiled quantised NNUE inference for the alpha-beta search, with incremental accumulators.

Owns the packed form of a ``QuantisedNNUE`` for compiled code (``pack``), the per-ply scratch
(``new_scratch``) and the compiled entry points ``nnue_root`` / ``nnue_evaluate`` that
``alphazero.search.evals`` calls for ``EVAL_NNUE``. The arithmetic is the reference's,
``alphazero.nets.nnue_file.QuantisedNNUE.evaluate``, bit for bit (tests check it node by node).
Knows the board through ``alphazero.board.kernel``'s arrays and the features through
``alphazero.nets.features.active_features``; nothing of torch.

Packed network, ``params = (header, weights)``
    ``header``  [H] int64: the ``H_*`` scalars below, then the feature blocks' ids [B] and offsets
                [B] (at ``H_BLOCK_IDS`` / ``H_BLOCK_OFFSETS``), ``l2_bias`` [L2] (at ``H_L2_BIAS``)
                and ``out_bias`` [K] (at ``H_OUT_BIAS``; K = ``H_BUCKETS`` output buckets)
    ``weights`` [W] int16: ``ft_weight`` [F, L1] row-major, ``ft_bias`` [L1], ``out_weight`` [K, width],
                ``l2_weight`` [L2, 2 * L1], each at the offset its ``H_*`` entry holds

Scratch, ``acc = (rows, lists, row_keys, cache_keys, cache_values, boards)``, by search ply; ``R`` =
plies + 1, the last row spare:
    ``rows``     [R, 2, L1] int16: the accumulators by colour (0 White, 1 Black; a colour's row does
                 not depend on who is to move, so it carries across a null move unchanged)
    ``boards``   [R, 12] uint64: the piece bitboards (``kernel``'s ``bb[:12]``) of the position the
                 row sums
    ``lists``    [R, 2, 1 + M] int32: column 0 the count n of active *board-wide* features (-1: no
                 row yet), then those n indices sorted (``M`` = ``max_active``)
    ``row_keys`` [R] uint64: the Zobrist key of the position the row was made for
    ``cache_keys`` [C] uint64, ``cache_values`` [C] int32: an evaluation cache, direct-mapped by the
                 key's low bits (C a power of two): a position evaluated before (the same quiescence
                 leaf in the next iteration of deepening, a transposition) is answered from it
                 without touching the rows; its children then diff against an older ancestor

Two kinds of blocks. *Piece-square* blocks (``all``, ``ka``, ``kb``) give each piece one feature of its
own (its colour, role and square; under the king blocks also the bucket of the perspective's king
square: the square itself under ``ka``, one of four under ``kb``), so a row's part from
them is a function of the twelve piece bitboards, bit by bit. *Board-wide* blocks (the axis, pair
and mobility blocks) are sets over the whole board, so their part is kept as a sorted list.

The update is lazy. The search evaluates at some nodes (quiescence stand-pat, null-move tests) and
not at others, so the row of ply - 1 is often not the parent's. But a row is exact for its own
pieces and list whatever position it came from, so the update never depends on finding the parent:
take a base row (the nearest ancestor on the current path, known by its key equalling
``keys[ST_PLY - back]``; else the row this ply last used, a sibling or cousin), compare the two
sets of piece bitboards (twelve XORs; usually two to four bits differ), subtract the features of
each piece gone and add those of each piece come; for board-wide blocks compute this position's
sorted list, merge it with the base's and add and subtract the rows of the difference. Refresh
from the bias instead when that would cost more than the position's active features, or under a
king block when the perspective's king has changed bucket (under ``ka``: moved). Unmake needs no
hook. A row whose key is the current position's is reused as it stands (PVS, LMR and aspiration
re-searches evaluate a node again).
Figures (docs/RESULTS.md): the bitboard diff, unsigned indices and inlining took the shipped net
(``all``, L1 128) from 638 to 166 ns an evaluation more than PeSTO's (the same walks on both).

Numba checks a cache entry against its own source file only, and ``evals`` / ``alphabeta`` compile
this module (and ``alphazero.nets.features``) into theirs: after editing either, delete
``alphazero/search/__pycache__/*.nbi`` too, or the search keeps running the old code.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from alphazero.board.bits import lsb, popcount
from alphazero.board.kernel import KING, OCC_BLACK, OCC_WHITE, ST_PLY, ST_SIDE
from alphazero.nets.features import ALL, KA, KB, KING_BUCKETS, active_features
from alphazero.nets.nnue_file import QA, QB, QuantisedNNUE

ARCH_SIMPLE, ARCH_PERSPECTIVE, ARCH_LAYERED = 0, 1, 2
ACT_CRELU, ACT_SCRELU = 0, 1
_ARCH_IDS = {"simple": ARCH_SIMPLE, "perspective": ARCH_PERSPECTIVE, "layered": ARCH_LAYERED}
_ACT_IDS = {"crelu": ACT_CRELU, "screlu": ACT_SCRELU}
PIECE_SQUARE_BLOCKS = (ALL, KA, KB)  # one feature per piece: kept by the bitboard diff, not in ``lists``

(H_L1, H_L2, H_ARCH, H_ACT, H_SCALE, H_OUT_BIAS, H_MAX_ACTIVE, H_NUM_BLOCKS, H_FT_WEIGHT, H_FT_BIAS,
 H_OUT_WEIGHT, H_L2_WEIGHT, H_BLOCK_IDS, H_BLOCK_OFFSETS, H_L2_BIAS, H_ALL, H_KA, H_BUCKETS, H_KING_MAP) = range(19)
H_SIZE = 19
ANCESTOR_WINDOW = 6  # plies looked back for an ancestor's row before falling back to this ply's own
EVAL_LIMIT = 30000  # centipawns; an evaluation is clamped inside it, clear of mate scores (32000 - ply)
_DOT_CHUNK = 256  # clipped crelu products (< 2^23 each) summed in int32 this many at a time: no overflow


def pack(net: QuantisedNNUE) -> tuple[np.ndarray, np.ndarray]:
    """``(header int64 [H], weights int16 [W])``, the layout in the module docstring. The header's
    block ids and offsets list the board-wide blocks only; ``H_ALL`` / ``H_KA`` hold the offsets of
    the piece-square blocks (-1 where the set has none; ``H_KA`` the king block's, ``ka`` or ``kb``,
    of which ``parse_features`` allows one) and ``H_KING_MAP`` that block's row of
    ``features.KING_BUCKETS``."""
    a = net.arrays
    fs = net.features
    parts = [a["ft_weight"].reshape(-1), a["ft_bias"], a["out_weight"].reshape(-1)]  # [K, width] row-major
    if net.arch == "layered":
        parts.append(a["l2_weight"].reshape(-1))
    offsets = np.concatenate([[0], np.cumsum([part.size for part in parts])]).astype(np.int64)
    weights = np.ascontiguousarray(np.concatenate(parts).astype(np.int16))
    wide = [b for b, block in enumerate(fs.block_ids) if block not in PIECE_SQUARE_BLOCKS]
    num_blocks = len(wide)
    l2 = net.l2 if net.arch == "layered" else 0
    buckets = net.buckets
    header = np.zeros(H_SIZE + 2 * num_blocks + l2 + buckets, np.int64)
    header[H_L1] = net.l1
    header[H_L2] = l2
    header[H_ARCH] = _ARCH_IDS[net.arch]
    header[H_ACT] = _ACT_IDS[net.activation]
    header[H_SCALE] = net.scale_int
    header[H_BUCKETS] = buckets
    header[H_OUT_BIAS] = H_SIZE + 2 * num_blocks + l2
    header[H_MAX_ACTIVE] = fs.max_active
    header[H_NUM_BLOCKS] = num_blocks
    header[H_FT_WEIGHT], header[H_FT_BIAS], header[H_OUT_WEIGHT] = offsets[0], offsets[1], offsets[2]
    header[H_L2_WEIGHT] = offsets[3] if net.arch == "layered" else 0
    header[H_BLOCK_IDS] = H_SIZE
    header[H_BLOCK_OFFSETS] = H_SIZE + num_blocks
    header[H_L2_BIAS] = H_SIZE + 2 * num_blocks
    header[H_ALL] = header[H_KA] = -1
    for block, offset in zip(fs.block_ids, fs.block_offsets):
        if block == ALL:
            header[H_ALL] = offset
        elif block in (KA, KB):
            header[H_KA] = offset
            header[H_KING_MAP] = int(block == KB)
    header[H_SIZE:H_SIZE + num_blocks] = fs.block_ids[wide]
    header[H_SIZE + num_blocks:H_SIZE + 2 * num_blocks] = fs.block_offsets[wide]
    if l2:
        header[H_SIZE + 2 * num_blocks:H_SIZE + 2 * num_blocks + l2] = a["l2_bias"]
    header[H_SIZE + 2 * num_blocks + l2:] = a["out_bias"]
    return header, weights


EVAL_CACHE = 1 << 16  # entries of the evaluation cache (768 KiB)


def new_scratch(l1: int, max_active: int, plies: int, cache: int = EVAL_CACHE) -> tuple[np.ndarray, ...]:
    """``(rows, lists, row_keys, cache_keys, cache_values, boards)`` for ``plies`` search plies (plus
    the spare row), all rows and the ``cache`` entries (a power of two) empty."""
    if cache < 1 or cache & (cache - 1):
        raise ValueError(f"evaluation cache size must be a power of two, got {cache}")
    rows = np.zeros((plies + 1, 2, l1), np.int16)
    lists = np.zeros((plies + 1, 2, 1 + max_active), np.int32)
    lists[:, :, 0] = -1
    boards = np.zeros((plies + 1, 12), np.uint64)
    return (rows, lists, np.zeros(plies + 1, np.uint64), np.zeros(cache, np.uint64), np.zeros(cache, np.int32),
            boards)


def row_features(params: tuple[np.ndarray, np.ndarray], acc: tuple[np.ndarray, ...], ply: int,
                 colour: int) -> list[int] | None:
    """The sorted feature indices ``rows[ply, colour]`` is the sum of (None: no row there): the
    piece-square features of the pieces in ``boards[ply]`` seen by ``colour``, and the board-wide
    ``lists``. For tests and debugging: the invariant the compiled update keeps."""
    header = params[0]
    lists, boards = acc[1], acc[5]
    n = int(lists[ply, colour, 0])
    if n < 0:
        return None
    features = [int(i) for i in lists[ply, colour, 1:1 + n]]
    board = [int(bits) for bits in boards[ply]]
    king = board[6 * colour + KING].bit_length() - 1
    for piece in range(12):
        for square in range(64):
            if board[piece] >> square & 1:
                if header[H_ALL] >= 0:
                    features.append(int(header[H_ALL]) + _piece_feature(piece, square, colour))
                if header[H_KA] >= 0:
                    bucket = int(KING_BUCKETS[header[H_KING_MAP], king ^ (56 * colour)])
                    features.append(int(header[H_KA]) + 768 * bucket + _piece_feature(piece, square, colour))
    return sorted(features)


# The compiled code below passes whole arrays with indices rather than slices, and indexes the inner
# loops with unsigned integers (``rows[p, c, k]``, all uint64). A slice is an array view, and numba
# counts references to views with atomic operations (about a third of the update's time when the
# helpers took row slices); a signed index costs a negative-index check that stops the loop from
# vectorising (3x slower). Unsigned, the loops vectorise and nothing is counted.


@njit(cache=True, inline="always")
def _piece_feature(piece, square, colour):
    """The ``all`` index of ``piece`` (kernel code 6 * colour + role) on ``square`` seen by ``colour``:
    ``64 * (6 * relative colour + role) + relative square`` (``alphazero.nets.features``)."""
    return 64 * (6 * ((piece // 6) ^ colour) + piece % 6) + (square ^ (56 * colour))


@njit(cache=True, inline="always")
def _add(rows, ply, colour, weights, start, l1):
    """``rows[ply, colour] += weights[start:start + l1]``."""
    p = np.uint64(ply)
    c = np.uint64(colour)
    first = np.uint64(start)
    for k in range(np.uint64(l1)):
        rows[p, c, k] += weights[first + k]


@njit(cache=True, inline="always")
def _subtract(rows, ply, colour, weights, start, l1):
    p = np.uint64(ply)
    c = np.uint64(colour)
    first = np.uint64(start)
    for k in range(np.uint64(l1)):
        rows[p, c, k] -= weights[first + k]


@njit(cache=True, inline="always")
def _piece_rows(weights, ft, l1, rows, ply, colour, piece, square, all_base, ka_base, sign):
    """Add (``sign`` 1) or subtract (-1) the rows of one piece's piece-square features to ``colour``'s
    row (the perspective is the row's colour)."""
    index = _piece_feature(piece, square, colour)
    if all_base >= 0:
        if sign > 0:
            _add(rows, ply, colour, weights, ft + (all_base + index) * l1, l1)
        else:
            _subtract(rows, ply, colour, weights, ft + (all_base + index) * l1, l1)
    if ka_base >= 0:
        if sign > 0:
            _add(rows, ply, colour, weights, ft + (ka_base + index) * l1, l1)
        else:
            _subtract(rows, ply, colour, weights, ft + (ka_base + index) * l1, l1)


@njit(cache=True)
def _refresh(weights, ft, bias, l1, rows, ply, colour, bb, all_base, ka_base, lists, spare, n):
    """The row from the bias: every piece's piece-square rows, then the board-wide features
    ``lists[spare, colour, 1:1 + n]``."""
    p = np.uint64(ply)
    c = np.uint64(colour)
    first = np.uint64(bias)
    for k in range(np.uint64(l1)):
        rows[p, c, k] = weights[first + k]
    for piece in range(12):
        pieces = bb[piece]
        while pieces:
            _piece_rows(weights, ft, l1, rows, ply, colour, piece, lsb(pieces), all_base, ka_base, 1)
            pieces &= pieces - np.uint64(1)
    for i in range(n):
        _add(rows, ply, colour, weights, ft + np.int64(lists[spare, colour, 1 + i]) * l1, l1)


@njit(cache=True)
def _count_changes(lists, base, spare, colour):
    """How many indices are in exactly one of the sorted lists ``lists[base, colour]`` and
    ``lists[spare, colour]`` (each: count, then the indices)."""
    n_old = lists[base, colour, 0]
    n_new = lists[spare, colour, 0]
    i = 0
    j = 0
    changes = 0
    while i < n_old and j < n_new:
        a = lists[base, colour, 1 + i]
        b = lists[spare, colour, 1 + j]
        if a == b:
            i += 1
            j += 1
        elif a < b:
            changes += 1
            i += 1
        else:
            changes += 1
            j += 1
    return changes + (n_old - i) + (n_new - j)


@njit(cache=True)
def _apply_changes(weights, ft, l1, rows, ply, colour, lists, base, spare):
    """Subtract the rows of features only in ``lists[base, colour]``, add those only in
    ``lists[spare, colour]`` (both sorted)."""
    n_old = lists[base, colour, 0]
    n_new = lists[spare, colour, 0]
    i = 0
    j = 0
    while i < n_old or j < n_new:
        a = lists[base, colour, 1 + i] if i < n_old else 0
        b = lists[spare, colour, 1 + j] if j < n_new else 0
        if j >= n_new or (i < n_old and a < b):
            _subtract(rows, ply, colour, weights, ft + np.int64(a) * l1, l1)
            i += 1
        elif i >= n_old or b < a:
            _add(rows, ply, colour, weights, ft + np.int64(b) * l1, l1)
            j += 1
        else:
            i += 1
            j += 1


@njit(cache=True, inline="always")
def _update_row(header, weights, bb, sq, st, rows, lists, boards, ply, base):
    """Make ``rows[ply]`` / ``lists[ply]`` / ``boards[ply]`` this position's, from row ``base`` (-1:
    refresh), as the module docstring describes."""
    l1 = header[H_L1]
    ft = header[H_FT_WEIGHT]
    nb = header[H_NUM_BLOCKS]
    all_offset = header[H_ALL]
    ka_offset = header[H_KA]
    spare = lists.shape[0] - 1
    side = st[ST_SIDE]
    n_changed = 0
    if base >= 0:
        for piece in range(12):
            n_changed += popcount(boards[base, piece] ^ bb[piece])
    pieces = popcount(bb[OCC_WHITE] | bb[OCC_BLACK])
    king_map = header[H_KING_MAP]
    ka_white = ka_black = np.int64(-1)
    if ka_offset >= 0:
        ka_white = ka_offset + 768 * KING_BUCKETS[king_map, lsb(bb[KING])]
        ka_black = ka_offset + 768 * KING_BUCKETS[king_map, lsb(bb[6 + KING]) ^ 56]
    # Per colour: its board-wide features (into the spare list), then diff or refresh.
    diff_white = diff_black = False
    for colour in range(2):
        n = 0
        if nb:
            n = active_features(bb, sq, st, header[H_SIZE:H_SIZE + nb], header[H_SIZE + nb:H_SIZE + 2 * nb],
                                colour ^ side, lists[spare, colour, 1:])
        lists[spare, colour, 0] = n
        if base < 0 or lists[base, colour, 0] < 0:
            continue
        if ka_offset >= 0 and (ka_offset + 768 * KING_BUCKETS[king_map, lsb(boards[base, 6 * colour + KING]) ^ (56 * colour)]
                               != (ka_white if colour == 0 else ka_black)):
            continue  # this perspective's king changed bucket: every king-block feature changed
        list_changes = _count_changes(lists, base, spare, colour) if nb else 0
        if n_changed + list_changes <= pieces + n:
            if base != ply:
                p = np.uint64(ply)
                b = np.uint64(base)
                c = np.uint64(colour)
                for k in range(np.uint64(l1)):
                    rows[p, c, k] = rows[b, c, k]
            if colour == 0:
                diff_white = True
            else:
                diff_black = True
    if n_changed and (diff_white or diff_black):
        one = np.uint64(1)
        for piece in range(12):
            old = boards[base, piece]
            new = bb[piece]
            if old == new:
                continue
            gone = old & ~new
            while gone:
                square = lsb(gone)
                if diff_white:
                    _piece_rows(weights, ft, l1, rows, ply, 0, piece, square, all_offset, ka_white, -1)
                if diff_black:
                    _piece_rows(weights, ft, l1, rows, ply, 1, piece, square, all_offset, ka_black, -1)
                gone &= gone - one
            came = new & ~old
            while came:
                square = lsb(came)
                if diff_white:
                    _piece_rows(weights, ft, l1, rows, ply, 0, piece, square, all_offset, ka_white, 1)
                if diff_black:
                    _piece_rows(weights, ft, l1, rows, ply, 1, piece, square, all_offset, ka_black, 1)
                came &= came - one
    for colour in range(2):
        diffed = diff_white if colour == 0 else diff_black
        if not diffed:
            _refresh(weights, ft, header[H_FT_BIAS], l1, rows, ply, colour, bb, all_offset,
                     ka_white if colour == 0 else ka_black, lists, spare, lists[spare, colour, 0])
        elif nb:
            _apply_changes(weights, ft, l1, rows, ply, colour, lists, base, spare)
        n = lists[spare, colour, 0]
        for i in range(n + 1):
            lists[ply, colour, i] = lists[spare, colour, i]
    for piece in range(12):
        boards[ply, piece] = bb[piece]


@njit(cache=True, inline="always")
def _crelu(x):
    """clamp(x, 0, QA) as int64."""
    x = np.int64(x)
    if x < 0:
        return np.int64(0)
    if x > QA:
        return np.int64(QA)
    return x


@njit(cache=True, inline="always")
def _dot(rows, ply, colour, weights, start, l1, screlu):
    """sum(a * w) (crelu) or sum(a * a * w) (screlu), a = clamp(rows[ply, colour], 0, QA) and w =
    ``weights[start:start + l1]``; int64. The crelu sum runs in int32 (which vectorises; measured 2.5x
    faster than int64) over chunks short enough never to overflow: |a * w| < 255 * 32768 < 2^31 / 256."""
    total = np.int64(0)
    p = np.uint64(ply)
    c = np.uint64(colour)
    w = np.uint64(start)
    if screlu:
        for j in range(np.uint64(l1)):
            v = _crelu(rows[p, c, j])
            total += v * v * weights[w + j]
        return total
    for first in range(0, l1, _DOT_CHUNK):
        part = np.int32(0)
        for j in range(np.uint64(first), np.uint64(min(first + _DOT_CHUNK, l1))):
            v = min(max(np.int32(rows[p, c, j]), np.int32(0)), np.int32(QA))
            part = np.int32(part + np.int32(v * np.int32(weights[w + j])))
        total += part
    return total


@njit(cache=True, inline="always")
def _output(header, weights, rows, ply, stm, bucket):
    """The raw output (QA * QB units, the constants of ``nnue_file`` frozen at compile time) from the
    accumulators of ``rows[ply]``, colour ``stm``'s (the side to move's) first, through output row ``bucket``."""
    l1 = header[H_L1]
    arch = header[H_ARCH]
    screlu = header[H_ACT] == ACT_SCRELU
    width = l1 if arch == ARCH_SIMPLE else 2 * l1 if arch == ARCH_PERSPECTIVE else header[H_L2]
    ow = header[H_OUT_WEIGHT] + bucket * width
    out_bias = header[header[H_OUT_BIAS] + bucket]
    if arch == ARCH_LAYERED:
        l2 = header[H_L2]
        w2 = header[H_L2_WEIGHT]
        b2 = header[H_L2_BIAS]
        out = out_bias
        for i in range(l2):
            start = w2 + i * 2 * l1
            total = _dot(rows, ply, stm, weights, start, l1, screlu)
            total += _dot(rows, ply, 1 - stm, weights, start + l1, l1, screlu)
            if screlu:
                total //= QA
            h = _crelu(total // QB + header[b2 + i] // QB)
            if screlu:
                h = h * h // QA
            out += h * weights[ow + i]
        return out
    total = _dot(rows, ply, stm, weights, ow, l1, screlu)
    if arch == ARCH_PERSPECTIVE:
        total += _dot(rows, ply, 1 - stm, weights, ow + l1, l1, screlu)
    if screlu:
        total //= QA
    return total + out_bias


@njit(cache=True)
def nnue_root(header, weights, bb, sq, st, keys, rows, lists, row_keys, boards):
    """Refresh row 0 for the search root (every later ply finds it as an ancestor)."""
    _update_row(header, weights, bb, sq, st, rows, lists, boards, 0, -1)
    row_keys[0] = keys[st[ST_PLY]]


@njit(cache=True, inline="always")
def nnue_evaluate(header, weights, bb, sq, st, keys, ply, rows, lists, row_keys, cache_keys, cache_values,
                  boards):
    """Centipawns for the side to move at search ply ``ply`` (clamped to +-``EVAL_LIMIT``): from the
    evaluation cache, else from ``rows[ply]`` updated from the best row available (module docstring)."""
    board_ply = st[ST_PLY]
    key = keys[board_ply]
    slot = np.int64(key & np.uint64(cache_keys.shape[0] - 1))
    if cache_keys[slot] == key:
        return np.int64(cache_values[slot])
    if not (row_keys[ply] == key and lists[ply, 0, 0] >= 0):
        base = ply if lists[ply, 0, 0] >= 0 else -1
        for back in range(1, min(ply, board_ply, ANCESTOR_WINDOW) + 1):
            j = ply - back
            if row_keys[j] == keys[board_ply - back] and lists[j, 0, 0] >= 0:
                base = j
                break
        _update_row(header, weights, bb, sq, st, rows, lists, boards, ply, base)
        row_keys[ply] = key
    buckets = header[H_BUCKETS]
    bucket = np.int64(0)
    if buckets > 1:  # nnue_file.output_bucket
        bucket = min((popcount(bb[OCC_WHITE] | bb[OCC_BLACK]) - 2) // ((32 + buckets - 1) // buckets), buckets - 1)
    out = _output(header, weights, rows, ply, st[ST_SIDE], bucket)
    cp = out * header[H_SCALE] // (QA * QB)
    if cp > EVAL_LIMIT:
        cp = EVAL_LIMIT
    if cp < -EVAL_LIMIT:
        cp = -EVAL_LIMIT
    cache_keys[slot] = key
    cache_values[slot] = cp
    return cp
