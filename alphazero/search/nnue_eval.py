"""Compiled quantised NNUE inference for the alpha-beta search, with incremental accumulators.

Owns the packed form of a ``QuantisedNNUE`` for compiled code (``pack``), the per-ply scratch
(``new_scratch``) and the compiled entry points ``nnue_root`` / ``nnue_evaluate`` that
``alphazero.search.evals`` calls for ``EVAL_NNUE``. The arithmetic is the reference's,
``alphazero.nets.nnue_file.QuantisedNNUE.evaluate``, bit for bit (tests check it node by node).
Knows the board through ``alphazero.board.kernel``'s arrays and the features through
``alphazero.nets.features.active_features``; nothing of torch.

Packed network, ``params = (header, weights)``
    ``header``  [H] int64: the ``H_*`` scalars below, then the feature blocks' ids [B] and offsets
                [B] (at ``H_BLOCK_IDS`` / ``H_BLOCK_OFFSETS``) and ``l2_bias`` [L2] (at ``H_L2_BIAS``)
    ``weights`` [W] int16: ``ft_weight`` [F, L1] row-major, ``ft_bias`` [L1], ``out_weight``,
                ``l2_weight`` [L2, 2 * L1], each at the offset its ``H_*`` entry holds

Scratch, ``acc = (rows, lists, row_keys, cache_keys, cache_values)``, by search ply; ``R`` = plies + 1,
the last row spare:
    ``rows``     [R, 2, L1] int16: the accumulators by colour (0 White, 1 Black; a colour's row does
                 not depend on who is to move, so it carries across a null move unchanged)
    ``lists``    [R, 2, 1 + M] int32: column 0 the count n of active features (-1: nothing yet), then
                 the n sorted feature indices the row is the sum of (``M`` = ``max_active``)
    ``row_keys`` [R] uint64: the Zobrist key of the position the row was made for
    ``cache_keys`` [C] uint64, ``cache_values`` [C] int32: an evaluation cache, direct-mapped by the
                 key's low bits (C a power of two): a position evaluated before (the same quiescence
                 leaf in the next iteration of deepening, a transposition) is answered from it
                 without touching the rows; its children then diff against an older ancestor

The update is lazy and generic over feature sets. The search evaluates at some nodes (quiescence
stand-pat, null-move tests) and not at others, so the row of ply - 1 is often not the parent's.
But a row is exact for its own lists whatever position it came from, so the update never depends
on finding the parent: compute this position's sorted lists, take a base row (the nearest ancestor
on the current path, known by its key equalling ``keys[ST_PLY - back]``; else the row this ply last
used, a sibling or cousin), merge the two sorted lists and add and subtract the weight rows of the
difference; when the difference is larger than the active count (a king move under ``ka``, the first
evaluation) refresh from the bias instead. Unmake needs no hook. A row whose key is the current
position's is reused as it stands (PVS, LMR and aspiration re-searches evaluate a node again).
Measured on the default NNUE (``all``, perspective, L1 256): 97% of updates find an ancestor, on
average 1.3 plies up, 3.5 changed features a colour; refreshes are almost never needed.

Numba checks a cache entry against its own source file only, and ``evals`` / ``alphabeta`` compile
this module (and ``alphazero.nets.features``) into theirs: after editing either, delete
``alphazero/search/__pycache__/*.nbi`` too, or the search keeps running the old code.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from alphazero.board.kernel import ST_PLY, ST_SIDE
from alphazero.nets.features import active_features
from alphazero.nets.nnue_file import QA, QB, QuantisedNNUE

ARCH_SIMPLE, ARCH_PERSPECTIVE, ARCH_LAYERED = 0, 1, 2
ACT_CRELU, ACT_SCRELU = 0, 1
_ARCH_IDS = {"simple": ARCH_SIMPLE, "perspective": ARCH_PERSPECTIVE, "layered": ARCH_LAYERED}
_ACT_IDS = {"crelu": ACT_CRELU, "screlu": ACT_SCRELU}

(H_L1, H_L2, H_ARCH, H_ACT, H_SCALE, H_OUT_BIAS, H_MAX_ACTIVE, H_NUM_BLOCKS, H_FT_WEIGHT, H_FT_BIAS,
 H_OUT_WEIGHT, H_L2_WEIGHT, H_BLOCK_IDS, H_BLOCK_OFFSETS, H_L2_BIAS) = range(15)
H_SIZE = 16
ANCESTOR_WINDOW = 6  # plies looked back for an ancestor's row before falling back to this ply's own
EVAL_LIMIT = 30000  # centipawns; an evaluation is clamped inside it, clear of mate scores (32000 - ply)


def pack(net: QuantisedNNUE) -> tuple[np.ndarray, np.ndarray]:
    """``(header int64 [H], weights int16 [W])``, the layout in the module docstring."""
    a = net.arrays
    fs = net.features
    parts = [a["ft_weight"].reshape(-1), a["ft_bias"], a["out_weight"]]
    if net.arch == "layered":
        parts.append(a["l2_weight"].reshape(-1))
    offsets = np.concatenate([[0], np.cumsum([part.size for part in parts])]).astype(np.int64)
    weights = np.ascontiguousarray(np.concatenate(parts).astype(np.int16))
    num_blocks = len(fs.blocks)
    l2 = net.l2 if net.arch == "layered" else 0
    header = np.zeros(H_SIZE + 2 * num_blocks + l2, np.int64)
    header[H_L1] = net.l1
    header[H_L2] = l2
    header[H_ARCH] = _ARCH_IDS[net.arch]
    header[H_ACT] = _ACT_IDS[net.activation]
    header[H_SCALE] = net.scale_int
    header[H_OUT_BIAS] = int(a["out_bias"][0])
    header[H_MAX_ACTIVE] = fs.max_active
    header[H_NUM_BLOCKS] = num_blocks
    header[H_FT_WEIGHT], header[H_FT_BIAS], header[H_OUT_WEIGHT] = offsets[0], offsets[1], offsets[2]
    header[H_L2_WEIGHT] = offsets[3] if net.arch == "layered" else 0
    header[H_BLOCK_IDS] = H_SIZE
    header[H_BLOCK_OFFSETS] = H_SIZE + num_blocks
    header[H_L2_BIAS] = H_SIZE + 2 * num_blocks
    header[H_SIZE:H_SIZE + num_blocks] = fs.block_ids
    header[H_SIZE + num_blocks:H_SIZE + 2 * num_blocks] = fs.block_offsets
    if l2:
        header[H_SIZE + 2 * num_blocks:] = a["l2_bias"]
    return header, weights


EVAL_CACHE = 1 << 16  # entries of the evaluation cache (768 KiB)


def new_scratch(l1: int, max_active: int, plies: int,
                cache: int = EVAL_CACHE) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(rows, lists, row_keys, cache_keys, cache_values)`` for ``plies`` search plies (plus the spare
    row), all rows and the ``cache`` entries (a power of two) empty."""
    if cache < 1 or cache & (cache - 1):
        raise ValueError(f"evaluation cache size must be a power of two, got {cache}")
    rows = np.zeros((plies + 1, 2, l1), np.int16)
    lists = np.zeros((plies + 1, 2, 1 + max_active), np.int32)
    lists[:, :, 0] = -1
    return rows, lists, np.zeros(plies + 1, np.uint64), np.zeros(cache, np.uint64), np.zeros(cache, np.int32)


@njit(cache=True, inline="always")
def _add(row, weights, start, l1):
    """``row += weights[start:start + l1]`` (a slice, so the loop indexes from 0 and vectorises)."""
    w = weights[start:start + l1]
    for k in range(l1):
        row[k] += w[k]


@njit(cache=True, inline="always")
def _subtract(row, weights, start, l1):
    w = weights[start:start + l1]
    for k in range(l1):
        row[k] -= w[k]


@njit(cache=True)
def _refresh(weights, ft, bias, l1, row, features, n):
    b = weights[bias:bias + l1]
    for k in range(l1):
        row[k] = b[k]
    for i in range(n):
        _add(row, weights, ft + np.int64(features[i]) * l1, l1)


@njit(cache=True)
def _count_changes(old, new, n_new):
    """How many indices are in exactly one of the sorted lists ``old[1:1 + old[0]]`` and ``new[:n_new]``."""
    n_old = old[0]
    i = 0
    j = 0
    changes = 0
    while i < n_old and j < n_new:
        a = old[1 + i]
        b = new[j]
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
def _apply_changes(weights, ft, l1, row, old, new, n_new):
    """Subtract the rows of features only in ``old``, add those only in ``new`` (both sorted)."""
    n_old = old[0]
    i = 0
    j = 0
    while i < n_old or j < n_new:
        if j >= n_new or (i < n_old and old[1 + i] < new[j]):
            _subtract(row, weights, ft + np.int64(old[1 + i]) * l1, l1)
            i += 1
        elif i >= n_old or new[j] < old[1 + i]:
            _add(row, weights, ft + np.int64(new[j]) * l1, l1)
            j += 1
        else:
            i += 1
            j += 1


@njit(cache=True)
def _update_row(header, weights, bb, sq, st, rows, lists, ply, base):
    """Make ``rows[ply]`` / ``lists[ply]`` this position's, from row ``base`` (-1: refresh)."""
    l1 = header[H_L1]
    ft = header[H_FT_WEIGHT]
    bias = header[H_FT_BIAS]
    nb = header[H_NUM_BLOCKS]
    block_ids = header[H_SIZE:H_SIZE + nb]
    block_offsets = header[H_SIZE + nb:H_SIZE + 2 * nb]
    spare = lists.shape[0] - 1
    side = st[ST_SIDE]
    for colour in range(2):
        fresh = lists[spare, colour]
        features = fresh[1:]
        n = active_features(bb, sq, st, block_ids, block_offsets, colour ^ side, features)
        row = rows[ply, colour]
        if base < 0 or lists[base, colour, 0] < 0:
            _refresh(weights, ft, bias, l1, row, features, n)
        else:
            old = lists[base, colour]
            changes = _count_changes(old, features, n)
            if changes > n:
                _refresh(weights, ft, bias, l1, row, features, n)
            else:
                if base != ply:
                    source = rows[base, colour]
                    for k in range(l1):
                        row[k] = source[k]
                if changes:
                    _apply_changes(weights, ft, l1, row, old, features, n)
        target = lists[ply, colour]
        target[0] = n
        for i in range(n):
            target[1 + i] = features[i]


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
def _dot(row, w, l1, screlu):
    """sum(a * w) (crelu) or sum(a * a * w) (screlu), a = clamp(row, 0, QA); int64."""
    total = np.int64(0)
    for j in range(l1):
        v = _crelu(row[j])
        total += (v * v if screlu else v) * w[j]
    return total


@njit(cache=True)
def _output(header, weights, stm_row, nstm_row):
    """The raw output (QA * QB units, the constants of ``nnue_file`` frozen at compile time) from the two
    accumulators, side to move first."""
    l1 = header[H_L1]
    arch = header[H_ARCH]
    screlu = header[H_ACT] == ACT_SCRELU
    ow = header[H_OUT_WEIGHT]
    out_bias = header[H_OUT_BIAS]
    if arch == ARCH_LAYERED:
        l2 = header[H_L2]
        w2 = header[H_L2_WEIGHT]
        b2 = header[H_L2_BIAS]
        out = out_bias
        for i in range(l2):
            start = w2 + i * 2 * l1
            total = _dot(stm_row, weights[start:start + l1], l1, screlu)
            total += _dot(nstm_row, weights[start + l1:start + 2 * l1], l1, screlu)
            if screlu:
                total //= QA
            h = _crelu(total // QB + header[b2 + i] // QB)
            if screlu:
                h = h * h // QA
            out += h * weights[ow + i]
        return out
    total = _dot(stm_row, weights[ow:ow + l1], l1, screlu)
    if arch == ARCH_PERSPECTIVE:
        total += _dot(nstm_row, weights[ow + l1:ow + 2 * l1], l1, screlu)
    if screlu:
        total //= QA
    return total + out_bias


@njit(cache=True)
def nnue_root(header, weights, bb, sq, st, keys, rows, lists, row_keys):
    """Refresh row 0 for the search root (every later ply finds it as an ancestor)."""
    _update_row(header, weights, bb, sq, st, rows, lists, 0, -1)
    row_keys[0] = keys[st[ST_PLY]]


@njit(cache=True)
def nnue_evaluate(header, weights, bb, sq, st, keys, ply, rows, lists, row_keys, cache_keys, cache_values):
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
        _update_row(header, weights, bb, sq, st, rows, lists, ply, base)
        row_keys[ply] = key
    side = st[ST_SIDE]
    out = _output(header, weights, rows[ply, side], rows[ply, 1 - side])
    cp = out * header[H_SCALE] // (QA * QB)
    if cp > EVAL_LIMIT:
        cp = EVAL_LIMIT
    if cp < -EVAL_LIMIT:
        cp = -EVAL_LIMIT
    cache_keys[slot] = key
    cache_values[slot] = cp
    return cp
