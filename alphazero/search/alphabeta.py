"""Alpha-beta search on the compiled board: iterative deepening, PVS, a transposition table.

Owns the search: the compiled negamax (principal variation search, fail-soft), quiescence, move
ordering, the transposition table and the Python driver ``AlphaBeta`` that deepens iteratively and
reports each iteration. Knows the position only as ``alphazero.board.kernel``'s arrays and the
evaluation only through the seam of ``alphazero.search.evals``; knows nothing of torch or Ray.

Scores are centipawns for the side to move at the node. A mate is ``MATE - plies`` from the root for
the winner (so a shorter mate scores higher and a longer loss less badly); ``|score| > MATE_BOUND``
marks one. Draws (repetition of an earlier position, fifty moves, insufficient material, stalemate)
score 0. A first repetition counts as a draw inside the search, the usual engine shortcut.

Per node: transposition-table probe (cut-offs at non-PV nodes only), check extension, the static
evaluation (kept by ply in ``evals`` for the "improving" test), reverse futility, null-move
pruning, legal moves ordered TT move > captures by MVV/LVA and queen promotions > two killers >
history > captures that lose material by SEE (under-promotions last), futility and late-move
pruning of quiet moves, PVS with late-move reductions, and at depth 0 a quiescence search over
captures and queen promotions (all moves when in check) with stand-pat, skipping captures that
lose material by static exchange evaluation (``see``). Each of these techniques is a bit of
``info[I_OPTIONS]`` (``TECHNIQUES``), so one compiled search plays every variant an SPRT compares;
``DEFAULT_TECHNIQUES`` has those that passed one, among them history-adjusted reductions (``histlmr``: a
late quiet move reduced a ply less per ``HISTORY_LMR_DIV`` of its history, more where it is negative, every
history kept by "gravity") with the history malus (``histmalus``: the quiet moves searched before a cut lose
what it gains). Off by default: late-move pruning, the improving flag, internal iterative reduction, a
null-move reduction that grows with depth, continuation histories (``conthist``: quiet moves also ordered,
and with ``histlmr`` reduced, by what followed the opponent's last move and our move before it, in
``cont``), a quiescence that probes and stores the transposition table (``qtt``), the pawn correction history
(``corrhist``: the static evaluation plus the mean error searches found for it in the same pawn structure),
singular extensions (``singular``: a search of the node's other moves, ``excluded`` the hash move, at half
depth below the table's score; the hash move searched a ply deeper when they all fail low, the node cut when
they beat beta without it) and ProbCut (``probcut``: at a deep non-PV node, a capture whose quiescence and
then a search four plies shallower beat beta by ``PROBCUT_MARGIN`` cuts the node).

Transposition table: ``tt`` [2 * B, 2] uint64, B a power of two buckets of two slots, column 0 the
full key (verified on probe) and column 1 the packed entry (bits 0-15 move, 16-31 score + 32768 with
mates stored relative to the node, 32-39 depth, 40-41 bound, 42-49 search age). Replacement: the
first slot of a bucket is depth-preferred (overwritten by the same key, an equal or deeper search,
or an entry from an earlier search), the second always-replace (takes what the first refused).
A TT move is only ever used to order the legal moves just generated, so a wrong one cannot be played.

Scratch arrays (owned by ``AlphaBeta``, reused across searches), ``P = MAX_PLY``:
``moves`` [P + 1, MAX_MOVES] int32 (move lists per ply; row ``ROOT_ROW`` = P lists the root moves
the search may play, ``info[I_ROOT_MOVES]`` of them, 0 meaning all: ``searchmoves`` and the lines of
MultiPV after the first), ``order`` [P, MAX_MOVES] int32 (their ordering scores),
``pv`` [P, P] int32 and ``pv_len`` [P] int64 (triangular principal variation), ``evals`` [P] int64
(static evaluation by ply, ``NO_EVAL`` at a node in check), ``killers`` [P, 2]
int32, ``history`` [2, 64, 64] int32 (side, from, to), ``corr`` [2, CORR_SIZE] int32 (``corrhist``), ``cont`` [2, 768, 768] int16 (``conthist``'s
tables: one and two plies back; rows (piece code, destination) of that move, columns those of the
move scored), ``info`` [INFO_SIZE] int64 (counters, limits, options; ``I_*`` below).

Stops: on depth (the driver's loop), on nodes (checked at every node), on time (``monotonic_ns``
against the deadline in ``info`` every 1024 nodes, inside compiled code), and on ``info[I_ABORT]``
(read at every node), which another thread sets (``AlphaBeta.abort``). ``search_iteration``, where
a search spends its time, releases the GIL (``nogil=True``), so while it runs the rest of the process
(a UCI command loop) goes on, and may write ``I_ABORT``, ``I_DEADLINE`` or ``I_NODE_LIMIT`` of the
running search's ``info`` (aligned int64 stores, read back at the next node or clock check). Neither
the flag nor the GIL costs speed: ``ab_nodes_per_s`` is unchanged (docs/RESULTS.md). A stopped iteration's score is discarded; its best root move is kept only if it was
fully searched and beat the previous.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

import chess
import numpy as np
from numba import njit

from alphazero.board import kernel as K
from alphazero.board.bits import lsb, monotonic_ns
from alphazero.board.kernel import (
    EMPTY,
    KING,
    NO_MOVE,
    OCC_BLACK,
    OCC_WHITE,
    PAWN,
    QUEEN,
    ST_EP,
    ST_HALFMOVE,
    ST_PLY,
    ST_SIDE,
    U_MOVE,
    attackers,
    bit,
    generate_moves,
    in_check,
    insufficient_material,
    is_repeated,
    make_move,
    make_null,
    non_pawn_pieces,
    unmake_move,
    unmake_null,
)
from alphazero.board.position import Position, move_from_chess, move_to_chess
from alphazero.nets.nnue_file import FloatNNUE, QuantisedNNUE, load_nnue, quantise
from alphazero.search.evals import EVAL_NNUE, EVALS, eval_root, evaluate, material_state
from alphazero.search.nnue_eval import new_scratch, pack

MAX_PLY = 128
MATE = 32000
INF = 32001
MATE_BOUND = MATE - MAX_PLY

(I_NODES, I_NODE_LIMIT, I_DEADLINE, I_STOPPED, I_SELDEPTH, I_AGE, I_OPTIONS, I_EVAL, I_QNODES, I_ABORT,
 I_ROOT_MOVES, I_ROOT_DEPTH) = range(12)
INFO_SIZE = 16
ROOT_ROW = MAX_PLY  # the row of ``moves`` that lists the allowed root moves
(OPT_NULL_MOVE, OPT_LMR, OPT_CHECK_EXT, OPT_RFP, OPT_FUTILITY, OPT_LMP, OPT_QSEE, OPT_IMPROVING,
 OPT_SEE_ORDER, OPT_HISTORY_MALUS, OPT_IIR, OPT_NULL_MOVE_DEPTH, OPT_CONT_HIST, OPT_QSEARCH_TT, OPT_CORRECTION,
 OPT_SINGULAR, OPT_HISTORY_LMR, OPT_PROBCUT) = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192,
                                                  16384, 32768, 65536, 131072)

# The search's switchable techniques (``AlphaBeta(techniques=...)``, ``ab:`` spec keys), each a bit of
# ``info[I_OPTIONS]``. DEFAULT_TECHNIQUES are those on unless a caller says otherwise: each one kept
# passed an SPRT at equal time against the search without it (docs/RESULTS.md, "The alpha-beta
# search, the fishtest way").
TECHNIQUES = {
    "nullmove": OPT_NULL_MOVE,  # null-move pruning
    "lmr": OPT_LMR,  # late-move reductions
    "checkext": OPT_CHECK_EXT,  # a node in check searches one ply deeper
    "rfp": OPT_RFP,  # reverse futility: a shallow node far above beta returns its static evaluation
    "futility": OPT_FUTILITY,  # a shallow node far below alpha skips its quiet moves
    "lmp": OPT_LMP,  # late-move pruning: a shallow node skips the quiet moves late in its order
    "qsee": OPT_QSEE,  # quiescence skips captures that lose material by static exchange evaluation
    "improving": OPT_IMPROVING,  # prune and reduce more where the static evaluation fell since our last move
    "seeorder": OPT_SEE_ORDER,  # captures that lose material by static exchange are tried after the quiet moves
    "histmalus": OPT_HISTORY_MALUS,  # a quiet cut also lowers the histories of the quiet moves searched before it
    "iir": OPT_IIR,  # internal iterative reduction: a node of depth >= 4 with no hash move searches one ply less
    "nmpdepth": OPT_NULL_MOVE_DEPTH,  # the null move's reduction grows with depth and with the margin over beta
    "conthist": OPT_CONT_HIST,  # quiet moves ordered by continuation histories too, every history kept by gravity
    "qtt": OPT_QSEARCH_TT,  # quiescence probes the transposition table (cuts at non-PV nodes, its move first) and stores
    "corrhist": OPT_CORRECTION,  # the static evaluation corrected by what searches found in the same pawn structure
    "singular": OPT_SINGULAR,  # singular extensions: the hash move searched a ply deeper where no other move comes near it
    "histlmr": OPT_HISTORY_LMR,  # LMR reduces a quiet move less the better its histories, more the worse (kept by gravity)
    "probcut": OPT_PROBCUT,  # a capture whose shallow search beats beta by a margin cuts a deep non-PV node
}
DEFAULT_TECHNIQUES = frozenset({"nullmove", "lmr", "checkext", "rfp", "futility", "qsee", "seeorder", "histlmr",
                                "histmalus"})

# Margins of the shallow-depth pruning, centipawns (PeSTO's scale: a pawn is about 100).
PRUNE_DEPTH = 6  # reverse futility, futility and late-move pruning act at depth <= this
RFP_MARGIN = 80  # per ply of depth left
FUTILITY_BASE, FUTILITY_MARGIN = 100, 80  # base + per ply
NO_EVAL = -INF - 1  # ``evals[ply]`` of a node in check: no static evaluation

# Static exchange evaluation: piece values by type (the king's only stops a capture sequence).
SEE_VALUES = np.array([100, 320, 330, 500, 900, 20000], np.int64)

BOUND_UPPER, BOUND_LOWER, BOUND_EXACT = 1, 2, 3
_MASK16 = np.uint64(0xFFFF)
_MASK8 = np.uint64(0xFF)
_MASK2 = np.uint64(3)
_SH16, _SH32, _SH40, _SH42 = np.uint64(16), np.uint64(32), np.uint64(40), np.uint64(42)
_ZERO = np.uint64(0)

# Ordering scores: all tactical moves above killers above history.
_TT_SCORE = 1 << 30
_TACTICAL = 1 << 26
_KILLER = 1 << 25
_HISTORY_CAP = 1 << 24
_UNDER_PROMOTION = -(1 << 20)
_BAD_CAPTURE = -(1 << 16)  # after every quiet move (history >= 0), before under-promotions
_PRUNED = -(1 << 29)  # ``order`` of a move pruned unsearched (the history maluses pass it by)
IIR_DEPTH = 4  # internal iterative reduction acts from this depth
# ``singular``: at a node of depth >= SINGULAR_DEPTH whose table entry holds a lower or exact bound at least
# depth - 3 deep, every other move is searched at (depth - 1) / 2 against that score less
# SINGULAR_MARGIN cp per ply; if all fail low the hash move is singular and searched one ply deeper; if
# they fail high at or above beta (multi-cut: two moves or more beat it) the node returns that bound.
SINGULAR_DEPTH = 6
SINGULAR_MARGIN = 2
# ``histlmr``: a late quiet move's reduction falls by one ply per HISTORY_LMR_DIV of its ordering score (its
# history, plus its continuation histories with ``conthist``), and rises as much where that is negative.
HISTORY_LMR_DIV = 8192
# ``probcut``: at a non-PV node of depth >= PROBCUT_DEPTH, a capture that beats beta + PROBCUT_MARGIN in
# quiescence and then in a search PROBCUT_REDUCTION plies shallower cuts the node (a lower bound).
PROBCUT_DEPTH = 5
PROBCUT_MARGIN = 200
PROBCUT_REDUCTION = 4
# ``conthist`` and ``histlmr``: histories kept by "gravity" (each update moves a value by ``bonus`` scaled down as it
# nears +-HISTORY_MAX, so no table outgrows the others or needs halving); the three together stay
# above ``_BAD_CAPTURE``.
HISTORY_MAX = 16384
# ``corrhist`` (Stockfish's pawn correction history): ``corr`` [2, CORR_SIZE] int32, by side to move and a
# hash of the pawns, holds the mean of (search score - static evaluation) at the nodes searched there, in
# 1/CORR_GRAIN centipawns, each update weighted min(depth + 1, 16) / CORR_WEIGHT, the mean kept within
# +-CORR_LIMIT_CP; the static evaluation (stand pat included) is read with it added.
CORR_BITS = 14
CORR_SIZE = 1 << CORR_BITS
CORR_GRAIN = 256
CORR_WEIGHT = 256
CORR_LIMIT_CP = 64
_PAWN_HASH_W = np.uint64(0x9E3779B97F4A7C15)
_PAWN_HASH_B = np.uint64(0xC2B2AE3D27D4EB4F)
_CORR_SHIFT = np.uint64(64 - CORR_BITS)  # the hash's top CORR_BITS bits index ``corr``
PIECE_SQUARES = 12 * 64  # rows and columns of a continuation table: (piece code, destination)

# Late-move reductions by [depth, move index]: the usual log * log shape.
LMR_TABLE = np.zeros((64, 64), np.int64)
for _d in range(1, 64):
    for _i in range(1, 64):
        LMR_TABLE[_d, _i] = max(1, int(0.75 + math.log(_d) * math.log(_i) / 2.25))


# ----------------------------------------------------------------------------------------------
# Transposition table

@njit(cache=True)
def tt_probe(tt, key):
    """Row of ``key``'s entry in ``tt``, or -1."""
    row = np.int64(key & np.uint64(tt.shape[0] // 2 - 1)) * 2
    if tt[row, 0] == key and tt[row, 1] != _ZERO:
        return row
    if tt[row + 1, 0] == key and tt[row + 1, 1] != _ZERO:
        return row + 1
    return -1


@njit(cache=True, inline="always")
def tt_move(data):
    return np.int64(data & _MASK16)


@njit(cache=True, inline="always")
def tt_score(data):
    return np.int64((data >> _SH16) & _MASK16) - 32768


@njit(cache=True, inline="always")
def tt_depth(data):
    return np.int64((data >> _SH32) & _MASK8)


@njit(cache=True, inline="always")
def tt_bound(data):
    return np.int64((data >> _SH40) & _MASK2)


@njit(cache=True, inline="always")
def tt_age(data):
    return np.int64((data >> _SH42) & _MASK8)


@njit(cache=True)
def tt_store(tt, key, move, score, depth, bound, age):
    row = np.int64(key & np.uint64(tt.shape[0] // 2 - 1)) * 2
    old = tt[row, 1]
    if not (tt[row, 0] == key or depth >= tt_depth(old) or tt_age(old) != age):
        row += 1
    if move == NO_MOVE and tt[row, 0] == key:
        move = tt_move(tt[row, 1])  # keep the best move known for this position
    tt[row, 0] = key
    tt[row, 1] = (np.uint64(move) | np.uint64(score + 32768) << _SH16 | np.uint64(min(depth, 255)) << _SH32
                  | np.uint64(bound) << _SH40 | np.uint64(age & 255) << _SH42)


@njit(cache=True, inline="always")
def _to_tt(score, ply):
    if score > MATE_BOUND:
        return score + ply
    if score < -MATE_BOUND:
        return score - ply
    return score


@njit(cache=True, inline="always")
def _from_tt(score, ply):
    if score > MATE_BOUND:
        return score - ply
    if score < -MATE_BOUND:
        return score + ply
    return score


# ----------------------------------------------------------------------------------------------
# Search

@njit(cache=True)
def _poll(info):
    """Count a node; set ``I_STOPPED`` on an abort, the node limit or (every 1024 nodes) the deadline.
    Once stopped, nothing more is counted, so a node limit is never exceeded."""
    if info[I_STOPPED]:
        return True
    if info[I_ABORT]:
        info[I_STOPPED] = 1
        return True
    nodes = info[I_NODES] + 1
    info[I_NODES] = nodes
    if nodes >= info[I_NODE_LIMIT]:
        info[I_STOPPED] = 1
    elif (nodes & 1023) == 0 and info[I_DEADLINE] > 0 and monotonic_ns() >= info[I_DEADLINE]:
        info[I_STOPPED] = 1
    return info[I_STOPPED] != 0


@njit(cache=True)
def _tactical_value(sq, st, move):
    """MVV/LVA score of a capture or queen promotion (0 for a quiet move, < 0 an under-promotion)."""
    start = move & 63
    end = (move >> 6) & 63
    promotion = move >> 12
    attacker = sq[start] % 6
    victim = sq[end]
    value = 0
    if victim != EMPTY:
        value = 16 * (victim % 6 + 1) - attacker
    elif attacker == PAWN and end == st[ST_EP]:
        value = 16 - PAWN
    if promotion == QUEEN:
        value += 16 * 5
    elif promotion:
        return _UNDER_PROMOTION
    return value


@njit(cache=True, inline="always")
def _see_start(bb, sq, st, move):
    """``(gain, on_square, occupied)`` once ``move`` is made: what it takes (en passant's pawn, a
    promotion's gain), the value standing on its square, the board's occupancy without the mover."""
    start = move & 63
    end = (move >> 6) & 63
    promotion = move >> 12
    side = st[ST_SIDE]
    occupied = bb[OCC_WHITE] | bb[OCC_BLACK]
    victim = sq[end]
    mover = sq[start] % 6
    gain = np.int64(0)
    if victim != EMPTY:
        gain = SEE_VALUES[victim % 6]
    elif mover == PAWN and end == st[ST_EP]:
        gain = SEE_VALUES[PAWN]
        occupied ^= bit(end - 8 if side == 0 else end + 8)  # the pawn taken en passant
    on_square = SEE_VALUES[mover]
    if promotion:
        gain += SEE_VALUES[promotion] - SEE_VALUES[PAWN]
        on_square = SEE_VALUES[promotion]
    return gain, on_square, occupied ^ bit(start)


@njit(cache=True, inline="always")
def _least_valuable(bb, found, colour):
    """``(kind, bits)``: the least valuable role of ``colour`` among ``found`` (not empty), its pieces there."""
    kind = 0
    piece_bits = found & bb[6 * colour]
    while piece_bits == 0:
        kind += 1
        piece_bits = found & bb[6 * colour + kind]
    return kind, piece_bits


@njit(cache=True)
def see(bb, sq, st, move):
    """Static exchange evaluation of ``move`` (a capture, en passant or promotion; 0 for a quiet
    move to a square nobody attacks): centipawns the side to move wins by the best sequence of
    recaptures on the destination, each side free to stop, least valuable attacker first, sliders
    behind sliders joining as the pieces in front leave (x-rays). Pins are not looked at; a king
    takes only when nothing defends the square."""
    end = (move >> 6) & 63
    gains = np.empty(34, np.int64)
    gains[0], on_square, occupied = _see_start(bb, sq, st, move)
    colour = 1 - st[ST_SIDE]
    depth = 0
    while True:
        found = attackers(bb, end, colour, occupied) & occupied
        if found == 0:
            break
        kind, piece_bits = _least_valuable(bb, found, colour)
        if kind == KING and attackers(bb, end, 1 - colour, occupied ^ bit(lsb(piece_bits))) & occupied:
            break  # the king may not take a defended piece
        depth += 1
        gains[depth] = on_square - gains[depth - 1]
        on_square = SEE_VALUES[kind]
        occupied ^= bit(lsb(piece_bits))
        colour = 1 - colour
        if depth == 33:
            break
    while depth > 0:
        gains[depth - 1] = -max(-gains[depth - 1], gains[depth])
        depth -= 1
    return gains[0]


@njit(cache=True)
def see_ge(bb, sq, st, move, threshold):
    """Whether ``see(bb, sq, st, move) >= threshold``, without building the swap list (Stockfish's
    ``see_ge``: the balance kept relative to the threshold, each side stopping as soon as going on
    cannot change the answer). The same exchanges as ``see``: least valuable attacker first, x-rays,
    a king takes only an undefended piece; the search asks this, ``see`` is the reference."""
    end = (move >> 6) & 63
    gain, on_square, occupied = _see_start(bb, sq, st, move)
    swap = gain - threshold
    if swap < 0:
        return False  # even unanswered, the capture wins less than the threshold
    swap = on_square - swap
    if swap <= 0:
        return True  # even losing the piece that took, the exchange stays at or above it
    colour = st[ST_SIDE]
    res = 1
    while True:
        colour = 1 - colour
        found = attackers(bb, end, colour, occupied) & occupied
        if found == 0:
            break
        kind, piece_bits = _least_valuable(bb, found, colour)
        if kind == KING:
            if attackers(bb, end, 1 - colour, occupied ^ bit(lsb(piece_bits))) & occupied:
                break  # the king may not take a defended piece: the side to take stops here
            return res == 0  # the king takes, and nothing answers
        res ^= 1
        swap = SEE_VALUES[kind] - swap
        if swap < res:
            break
        occupied ^= bit(lsb(piece_bits))
    return res == 1


@njit(cache=True, inline="always")
def _gravity(value, bonus):
    """A history value moved by ``bonus`` (signed), the step shrinking as the value nears its bound."""
    return value + bonus - value * abs(bonus) // HISTORY_MAX


@njit(cache=True)
def _continuations(sq, st, undo):
    """``(c1, c2)``: the (piece, destination) rows of ``cont`` for the opponent's last move and our
    move before it, as the pieces stand now (-1 where there is none: the game's start, a null move,
    a piece taken since, or the square left empty by castling or en passant)."""
    c1 = -1
    c2 = -1
    to1 = -1
    ply = st[ST_PLY]
    if ply >= 1 and undo[ply - 1, U_MOVE] != NO_MOVE:
        to1 = (undo[ply - 1, U_MOVE] >> 6) & 63
        if sq[to1] != EMPTY:
            c1 = sq[to1] * 64 + to1
    if ply >= 2 and undo[ply - 2, U_MOVE] != NO_MOVE:
        to2 = (undo[ply - 2, U_MOVE] >> 6) & 63
        if to2 != to1 and sq[to2] != EMPTY:
            c2 = sq[to2] * 64 + to2
    return c1, c2


@njit(cache=True, inline="always")
def _quiet_score(sq, side, move, history, cont, c1, c2):
    """The ordering score of a quiet move: its history, plus its continuation histories when known."""
    start = move & 63
    end = (move >> 6) & 63
    score = np.int64(history[side, start, end])
    column = sq[start] * 64 + end
    if c1 >= 0:
        score += cont[0, c1, column]
    if c2 >= 0:
        score += cont[1, c2, column]
    return score


@njit(cache=True)
def _update_quiet(sq, side, move, bonus, history, cont, c1, c2):
    """``conthist``'s update of a quiet move's histories by ``bonus`` (negative: a malus)."""
    start = move & 63
    end = (move >> 6) & 63
    history[side, start, end] = _gravity(np.int64(history[side, start, end]), bonus)
    column = sq[start] * 64 + end
    if c1 >= 0:
        cont[0, c1, column] = _gravity(np.int64(cont[0, c1, column]), bonus)
    if c2 >= 0:
        cont[1, c2, column] = _gravity(np.int64(cont[1, c2, column]), bonus)


@njit(cache=True)
def _update_histories(sq, st, side, move, depth, i, row_moves, row_order, history, cont, c1, c2, gravity, malus):
    """The histories' update at a quiet cut by ``move`` (the ``i``-th searched). With ``gravity``
    (``conthist`` or ``histlmr``) every history of the move goes up by a bonus and, with ``malus``, those of the quiet
    moves searched before it down by as much; without, the plain history goes up by depth^2 and, with
    ``malus``, theirs down (floored at 0), all halved once one reaches ``_HISTORY_CAP``."""
    bonus = (min(16 * depth * depth + 64 * depth, 1600) if depth > 0 else 16) if gravity else depth * depth
    if gravity:
        _update_quiet(sq, side, move, bonus, history, cont, c1, c2)
    else:
        history[side, move & 63, (move >> 6) & 63] += bonus
    if malus:  # the quiet moves searched before it did not cut
        for j in range(i):
            earlier = row_moves[j]
            if row_order[j] != _PRUNED and _tactical_value(sq, st, earlier) == 0:
                if gravity:
                    _update_quiet(sq, side, earlier, -bonus, history, cont, c1, c2)
                else:
                    frm, to = earlier & 63, (earlier >> 6) & 63
                    history[side, frm, to] = max(0, history[side, frm, to] - bonus)
    if not gravity and history[side, move & 63, (move >> 6) & 63] >= _HISTORY_CAP:
        for a in range(2):
            for b in range(64):
                for c in range(64):
                    history[a, b, c] //= 2


@njit(cache=True)
def _score_moves(bb, sq, st, moves, order, n, hash_move, killers, history, cont, c1, c2, ply, see_order):
    side = st[ST_SIDE]
    for i in range(n):
        move = moves[i]
        if move == hash_move:
            order[i] = _TT_SCORE
            continue
        value = _tactical_value(sq, st, move)
        if value > 0:
            order[i] = _TACTICAL + value
            if see_order and sq[(move >> 6) & 63] != EMPTY and not see_ge(bb, sq, st, move, 0):
                order[i] = _BAD_CAPTURE + value
        elif value < 0:
            order[i] = value
        elif move == killers[ply, 0]:
            order[i] = _KILLER
        elif move == killers[ply, 1]:
            order[i] = _KILLER - 1
        else:
            order[i] = _quiet_score(sq, side, move, history, cont, c1, c2)


@njit(cache=True, inline="always")
def _score_tactical(sq, st, moves, order, n, hash_move):
    """Ordering scores of a list of captures and promotions (quiescence, ProbCut): the hash move first,
    then MVV/LVA."""
    for i in range(n):
        value = _tactical_value(sq, st, moves[i])
        order[i] = _TT_SCORE if moves[i] == hash_move else value + (_TACTICAL if value > 0 else 0)


@njit(cache=True, inline="always")
def _pick(moves, order, i, n):
    """Swap the best-ordered move of ``i..n-1`` into place ``i`` (selection: most nodes cut early)."""
    best = i
    for j in range(i + 1, n):
        if order[j] > order[best]:
            best = j
    if best != i:
        moves[i], moves[best] = moves[best], moves[i]
        order[i], order[best] = order[best], order[i]
    return moves[i]


@njit(cache=True, inline="always")
def _pawn_index(bb):
    """``corr``'s column for the pawns as they stand (a multiplicative hash of the two pawn bitboards)."""
    return np.int64(((bb[PAWN] * _PAWN_HASH_W) ^ (bb[6 + PAWN] * _PAWN_HASH_B)) >> _CORR_SHIFT)


@njit(cache=True, inline="always")
def _corrected(raw, corr, bb, side):
    """The static evaluation ``raw`` with the correction learned for this pawn structure added."""
    return raw + corr[side, _pawn_index(bb)] // CORR_GRAIN


@njit(cache=True)
def _update_correction(corr, bb, side, raw, score, depth):
    """Move the correction of this pawn structure toward ``score - raw`` by a depth-weighted step."""
    index = _pawn_index(bb)
    weight = min(depth + 1, 16)
    limit = CORR_LIMIT_CP * CORR_GRAIN
    value = (np.int64(corr[side, index]) * (CORR_WEIGHT - weight) + (score - raw) * CORR_GRAIN * weight) // CORR_WEIGHT
    corr[side, index] = max(-limit, min(limit, value))


@njit(cache=True)
def quiesce(bb, sq, st, keys, undo, moves, order, tt, corr, pv_len, info, params, acc, alpha, beta, ply):
    """Quiescence: stand pat, then captures and queen promotions (every move when in check)."""
    pv_len[ply] = ply
    if _poll(info):
        return 0
    info[I_QNODES] += 1
    if ply > info[I_SELDEPTH]:
        info[I_SELDEPTH] = ply
    kind = info[I_EVAL]
    if ply >= MAX_PLY - 1:
        return evaluate(kind, bb, sq, st, keys, ply, params, acc)
    use_tt = (info[I_OPTIONS] & OPT_QSEARCH_TT) != 0
    key = keys[st[ST_PLY]]
    hash_move = NO_MOVE
    if use_tt:
        row = tt_probe(tt, key)
        if row >= 0:
            data = tt[row, 1]
            hash_move = tt_move(data)
            if beta - alpha == 1:  # every stored depth is >= a quiescence node's 0
                score = _from_tt(tt_score(data), ply)
                bound = tt_bound(data)
                if bound == BOUND_EXACT or (bound == BOUND_LOWER and score >= beta) or \
                        (bound == BOUND_UPPER and score <= alpha):
                    return score
    alpha_start = alpha
    checked = in_check(bb, st)
    if checked:
        best = -MATE + ply
        n = generate_moves(bb, sq, st, moves[ply], False)
        if n == 0:
            return best
    else:
        best = evaluate(kind, bb, sq, st, keys, ply, params, acc)
        if info[I_OPTIONS] & OPT_CORRECTION:
            best = _corrected(best, corr, bb, st[ST_SIDE])
        if best >= beta:
            if use_tt:
                tt_store(tt, key, NO_MOVE, _to_tt(best, ply), 0, BOUND_LOWER, info[I_AGE])
            return best
        if best > alpha:
            alpha = best
        n = generate_moves(bb, sq, st, moves[ply], True)
    row_moves = moves[ply]
    row_order = order[ply]
    _score_tactical(sq, st, row_moves, row_order, n, hash_move)
    best_move = NO_MOVE
    prune_losing = not checked and (info[I_OPTIONS] & OPT_QSEE) != 0
    for i in range(n):
        move = _pick(row_moves, row_order, i, n)
        if prune_losing and not see_ge(bb, sq, st, move, 0):
            continue  # a capture that loses material cannot lift the score above standing pat
        make_move(bb, sq, st, keys, undo, move)
        score = -quiesce(bb, sq, st, keys, undo, moves, order, tt, corr, pv_len, info, params, acc, -beta, -alpha, ply + 1)
        unmake_move(bb, sq, st, undo)
        if info[I_STOPPED]:
            return 0
        if score > best:
            best = score
            if score > alpha:
                alpha = score
                best_move = move
                if score >= beta:
                    break
    if use_tt:
        bound = BOUND_LOWER if best >= beta else BOUND_EXACT if best > alpha_start else BOUND_UPPER
        tt_store(tt, key, best_move, _to_tt(best, ply), 0, bound, info[I_AGE])
    return best


@njit(cache=True)
def negamax(bb, sq, st, keys, undo, moves, order, tt, killers, history, cont, corr, pv, pv_len, evals, info, params, acc,
            depth, alpha, beta, ply, excluded):
    """Principal variation search to ``depth`` plies (fail-soft); the root is ``ply`` 0.

    ``excluded`` (``NO_MOVE`` but in the search ``singular`` makes): a move this node does not search;
    such a search neither cuts on nor stores to the table, and makes no null move.

    Recursive calls pass no literal arguments: numba compiles a literal (``True``, ``1``) in a
    recursive call as its own specialisation, and a cached one then fails to load."""
    if depth <= 0 and not in_check(bb, st):
        return quiesce(bb, sq, st, keys, undo, moves, order, tt, corr, pv_len, info, params, acc, alpha, beta, ply)
    pv_len[ply] = ply
    if _poll(info):
        return 0
    if ply > info[I_SELDEPTH]:
        info[I_SELDEPTH] = ply
    kind = info[I_EVAL]
    root = ply == 0
    if not root:
        if is_repeated(st, keys) or insufficient_material(bb):
            return 0
        # Mate distance pruning: no line from here beats a mate already found nearer the root.
        if alpha < -MATE + ply:
            alpha = -MATE + ply
        if beta > MATE - ply - 1:
            beta = MATE - ply - 1
        if alpha >= beta:
            return alpha
        if ply >= MAX_PLY - 1:
            return evaluate(kind, bb, sq, st, keys, ply, params, acc)
    options = info[I_OPTIONS]
    checked = in_check(bb, st)
    if checked and (options & OPT_CHECK_EXT):
        depth += 1  # check extension: forcing lines are seen to their end
    pv_node = beta - alpha > 1
    key = keys[st[ST_PLY]]
    age = info[I_AGE]
    no_move = excluded - excluded  # NO_MOVE, typed as ``excluded`` for the calls below (not a literal)
    searching_all = excluded == NO_MOVE

    hash_move = NO_MOVE
    data = _ZERO
    row = tt_probe(tt, key)
    if row >= 0:
        data = tt[row, 1]
        hash_move = tt_move(data)
        if not root and not pv_node and searching_all and tt_depth(data) >= depth:
            score = _from_tt(tt_score(data), ply)
            bound = tt_bound(data)
            if bound == BOUND_EXACT or (bound == BOUND_LOWER and score >= beta) or \
                    (bound == BOUND_UPPER and score <= alpha):
                return score
    if (options & OPT_IIR) and not root and depth >= IIR_DEPTH and hash_move == NO_MOVE:
        depth -= 1  # internal iterative reduction: no move known here, so a cheaper first look

    side = st[ST_SIDE]
    # The static evaluation, for the pruning below; ``improving`` (1 or 0, always 0 unless that
    # technique is on): it rose since this side's last move, two plies up (a node in check there,
    # which has no evaluation, counts as improving; so does the root).
    static = NO_EVAL
    raw = NO_EVAL
    use_improving = (options & OPT_IMPROVING) != 0
    use_corr = (options & OPT_CORRECTION) != 0
    improving = 0
    if not checked:
        raw = evaluate(kind, bb, sq, st, keys, ply, params, acc)
        static = _corrected(raw, corr, bb, side) if use_corr else raw
        if use_improving:
            improving = 1 if ply < 2 or evals[ply - 2] == NO_EVAL or static > evals[ply - 2] else 0
    evals[ply] = static
    shallow = not root and not pv_node and not checked and depth <= PRUNE_DEPTH
    if (options & OPT_RFP) and shallow and beta < MATE_BOUND and beta > -MATE_BOUND \
            and static - RFP_MARGIN * (depth - improving) >= beta:
        return static  # reverse futility: so far above beta that no quiet search will bring it down
    if (options & OPT_NULL_MOVE) and not root and not pv_node and not checked and depth >= 3 and searching_all \
            and undo[st[ST_PLY] - 1, U_MOVE] != NO_MOVE and beta < MATE_BOUND \
            and non_pawn_pieces(bb, side) >= 2 and static >= beta:
        # Null move: if passing still fails high, a real move would too. Not in zugzwang, where
        # passing is the best "move": likeliest with few pieces, hence at least two besides pawns
        # (Morphy's mate in two, a zugzwang against a lone bishop, is in the tests).
        if options & OPT_NULL_MOVE_DEPTH:  # Stockfish's shape: deeper, and further above beta, reduce more
            reduction = 3 + depth // 3 + min((static - beta) // 200, 3)
        else:
            reduction = 3 if depth >= 6 else 2
        make_null(st, keys, undo)
        score = -negamax(bb, sq, st, keys, undo, moves, order, tt, killers, history, cont, corr, pv, pv_len, evals, info,
                         params, acc, depth - 1 - reduction, -beta, -beta + 1, ply + 1, no_move)
        unmake_null(st, undo)
        if info[I_STOPPED]:
            return 0
        if score >= beta:
            return beta if score >= MATE_BOUND else score

    # ProbCut: a capture whose quiescence and then shallow search both beat beta by a margin would
    # most likely beat beta in the full search too. Skipped where the table already holds a search
    # nearly as deep below that bound. Fills ``moves[ply]`` before the node's own moves are generated.
    if (options & OPT_PROBCUT) and not pv_node and not checked and searching_all and depth >= PROBCUT_DEPTH \
            and beta > -MATE_BOUND and beta < MATE_BOUND - PROBCUT_MARGIN \
            and not (row >= 0 and tt_depth(data) > depth - PROBCUT_REDUCTION
                     and _from_tt(tt_score(data), ply) < beta + PROBCUT_MARGIN):
        cut_beta = beta + PROBCUT_MARGIN
        row_moves = moves[ply]
        row_order = order[ply]
        n = generate_moves(bb, sq, st, row_moves, True)
        _score_tactical(sq, st, row_moves, row_order, n, hash_move)
        for i in range(n):
            move = _pick(row_moves, row_order, i, n)
            if not see_ge(bb, sq, st, move, cut_beta - static):
                continue  # even winning the exchange would leave it short of the bound
            make_move(bb, sq, st, keys, undo, move)
            score = -quiesce(bb, sq, st, keys, undo, moves, order, tt, corr, pv_len, info, params, acc,
                             -cut_beta, -cut_beta + 1, ply + 1)
            if score >= cut_beta:
                score = -negamax(bb, sq, st, keys, undo, moves, order, tt, killers, history, cont, corr, pv, pv_len,
                                 evals, info, params, acc, depth - 1 - PROBCUT_REDUCTION, -cut_beta, -cut_beta + 1,
                                 ply + 1, no_move)
            unmake_move(bb, sq, st, undo)
            if info[I_STOPPED]:
                return 0
            if score >= cut_beta:
                tt_store(tt, key, move, _to_tt(score, ply), depth - PROBCUT_REDUCTION + 1, BOUND_LOWER, age)
                return score
        pv_len[ply] = ply

    # Singular extension: is the hash move far better than every other? Searched before this node's
    # moves are generated, since the search without the hash move fills the same rows of ``moves``.
    extension = 0
    if (options & OPT_SINGULAR) and not root and searching_all and depth >= SINGULAR_DEPTH and row >= 0 \
            and hash_move != NO_MOVE and ply < 2 * info[I_ROOT_DEPTH] and tt_depth(data) >= depth - 3 \
            and tt_bound(data) != BOUND_UPPER:
        tt_value = _from_tt(tt_score(data), ply)
        if tt_value > -MATE_BOUND and tt_value < MATE_BOUND:
            singular_beta = tt_value - SINGULAR_MARGIN * depth
            score = negamax(bb, sq, st, keys, undo, moves, order, tt, killers, history, cont, corr, pv, pv_len, evals,
                            info, params, acc, (depth - 1) // 2, singular_beta - 1, singular_beta, ply, hash_move)
            if info[I_STOPPED]:
                return 0
            pv_len[ply] = ply
            evals[ply] = static
            if score < singular_beta:
                extension = 1
            elif singular_beta >= beta:
                return singular_beta  # multi-cut: another move beats beta too, without the hash move

    n = generate_moves(bb, sq, st, moves[ply], False)
    if n == 0:
        return -MATE + ply if checked else 0
    if not root and st[ST_HALFMOVE] >= 100:
        return 0  # fifty moves (checkmate, tested above, takes precedence)
    restricted = root and info[I_ROOT_MOVES] > 0
    if restricted:
        n = _keep_allowed(moves[ply], n, moves[ROOT_ROW], info[I_ROOT_MOVES])
    row_moves = moves[ply]
    row_order = order[ply]
    use_cont = (options & OPT_CONT_HIST) != 0
    use_history_lmr = (options & OPT_HISTORY_LMR) != 0
    c1 = -1
    c2 = -1
    if use_cont:
        c1, c2 = _continuations(sq, st, undo)
    _score_moves(bb, sq, st, row_moves, row_order, n, hash_move, killers, history, cont, c1, c2, ply,
                 (options & OPT_SEE_ORDER) != 0)

    # Quiet moves that do not give check are skipped, after the first move, at a shallow node whose
    # static evaluation is far below alpha (futility) or once ``late`` moves were tried (late-move
    # pruning; fewer where the evaluation is not improving).
    futile = (options & OPT_FUTILITY) != 0 and shallow and alpha > -MATE_BOUND \
        and static + FUTILITY_BASE + FUTILITY_MARGIN * depth <= alpha
    late = K.MAX_MOVES
    if (options & OPT_LMP) and shallow:
        late = (3 + depth * depth) // (2 - improving) if use_improving else 3 + depth * depth
    alpha_start = alpha
    best = -INF
    best_move = NO_MOVE
    for i in range(n):
        move = _pick(row_moves, row_order, i, n)
        if move == excluded:
            row_order[i] = _PRUNED
            continue
        quiet = _tactical_value(sq, st, move) == 0
        killer = move == killers[ply, 0] or move == killers[ply, 1]
        make_move(bb, sq, st, keys, undo, move)
        gives_check = i > 0 and quiet and in_check(bb, st)  # asked only where pruning or LMR may act
        if i > 0 and quiet and not gives_check and (futile or i >= late) and best > -MATE_BOUND:
            unmake_move(bb, sq, st, undo)
            row_order[i] = _PRUNED
            continue
        new_depth = depth - 1 + extension if move == hash_move else depth - 1
        if i == 0:
            score = -negamax(bb, sq, st, keys, undo, moves, order, tt, killers, history, cont, corr, pv, pv_len, evals, info,
                             params, acc, new_depth, -beta, -alpha, ply + 1, no_move)
        else:
            reduction = 0
            if (options & OPT_LMR) and depth >= 3 and i >= 3 and quiet and not killer and not checked \
                    and not gives_check:
                reduction = LMR_TABLE[min(depth, 63), min(i, 63)]
                if pv_node and reduction > 1:
                    reduction -= 1
                if use_improving and not improving:
                    reduction += 1
                if use_history_lmr:
                    reduction -= row_order[i] // HISTORY_LMR_DIV  # the ordering score: its histories
                    if reduction < 0:
                        reduction = 0
                if reduction > depth - 2:
                    reduction = depth - 2
            score = -negamax(bb, sq, st, keys, undo, moves, order, tt, killers, history, cont, corr, pv, pv_len, evals, info,
                             params, acc, new_depth - reduction, -alpha - 1, -alpha, ply + 1, no_move)
            if score > alpha and reduction > 0:
                score = -negamax(bb, sq, st, keys, undo, moves, order, tt, killers, history, cont, corr, pv, pv_len, evals, info,
                                 params, acc, new_depth, -alpha - 1, -alpha, ply + 1, no_move)
            if score > alpha and score < beta:
                score = -negamax(bb, sq, st, keys, undo, moves, order, tt, killers, history, cont, corr, pv, pv_len, evals, info,
                                 params, acc, new_depth, -beta, -alpha, ply + 1, no_move)
        unmake_move(bb, sq, st, undo)
        if info[I_STOPPED]:
            return 0
        if score > best:
            best = score
            best_move = move
            if score > alpha:
                alpha = score
                pv[ply, ply] = move
                child_end = pv_len[ply + 1]
                for j in range(ply + 1, child_end):
                    pv[ply, j] = pv[ply + 1, j]
                pv_len[ply] = max(child_end, ply + 1)
                if score >= beta:
                    if quiet:
                        if killers[ply, 0] != move:
                            killers[ply, 1] = killers[ply, 0]
                            killers[ply, 0] = move
                        _update_histories(sq, st, side, move, depth, i, row_moves, row_order, history, cont, c1, c2,
                                          use_cont or use_history_lmr, (options & OPT_HISTORY_MALUS) != 0)
                    break

    if best == -INF:
        return alpha  # no move searched: the excluded one was the only legal move
    if best >= beta:
        bound = BOUND_LOWER
    elif best > alpha_start:
        bound = BOUND_EXACT
    else:
        bound = BOUND_UPPER
        best_move = hash_move  # a fail-low's "best" move is noise; keep the known one
    if not restricted and searching_all:  # a score over some of the moves only is not the position's
        tt_store(tt, key, best_move, _to_tt(best, ply), depth, bound, age)
        # The correction learns where the score says more than its bound: not from a cut by a capture
        # (the evaluation was not wrong, the move won material), nor from a bound on the wrong side.
        if use_corr and not checked and best > -MATE_BOUND and best < MATE_BOUND \
                and (bound == BOUND_UPPER or _tactical_value(sq, st, best_move) == 0) \
                and not (bound == BOUND_LOWER and best <= static) and not (bound == BOUND_UPPER and best >= static):
            _update_correction(corr, bb, side, raw, best, depth)
    return best


@njit(cache=True)
def _keep_allowed(row, n, allowed, count):
    """Keep in ``row[:n]`` only the moves listed in ``allowed[:count]`` (order kept); how many."""
    kept = 0
    for i in range(n):
        move = row[i]
        for j in range(count):
            if allowed[j] == move:
                row[kept] = move
                kept += 1
                break
    return kept


@njit(cache=True, nogil=True)
def search_iteration(bb, sq, st, keys, undo, moves, order, tt, killers, history, cont, corr, pv, pv_len, evals, info,
                     params, acc, depth, previous, window):
    """One iteration of iterative deepening from the root: an aspiration window of ``window``
    centipawns around ``previous`` (from depth 4, not around mates), widened on each failure."""
    alpha = -INF
    beta = INF
    delta = window
    if depth >= 4 and window > 0 and previous > -MATE_BOUND and previous < MATE_BOUND:
        alpha = max(previous - delta, -INF)
        beta = min(previous + delta, INF)
    root = np.int64(0)  # a typed zero: a literal 0 would compile (and mis-cache) a specialisation
    info[I_ROOT_DEPTH] = depth
    while True:
        score = negamax(bb, sq, st, keys, undo, moves, order, tt, killers, history, cont, corr, pv, pv_len, evals, info,
                        params, acc, depth, alpha, beta, root, root)
        if info[I_STOPPED]:
            return score
        if score <= alpha and alpha > -INF:
            alpha = max(score - delta, -INF)
        elif score >= beta and beta < INF:
            beta = min(score + delta, INF)
        else:
            return score
        delta *= 2
        if delta > 1000:
            alpha = -INF
            beta = INF


# ----------------------------------------------------------------------------------------------
# The Python driver

@dataclass
class SearchInfo:
    """What one search found, for ``info`` lines and logs. ``score_cp`` is None when ``mate`` is set
    (moves to mate, negative when the side to move is being mated). ``lines`` holds every line of a
    MultiPV search, best first (the first is this line itself; a plain search has that one)."""

    depth: int = 0
    seldepth: int = 0
    score_cp: int | None = 0
    mate: int | None = None
    nodes: int = 0
    time_s: float = 0.0
    pv: list[str] = field(default_factory=list)
    lines: list[SearchInfo] = field(default_factory=list)

    @property
    def nps(self) -> int:
        return int(self.nodes / self.time_s) if self.time_s > 0 else 0

    def uci(self) -> str:
        """The UCI ``info`` line (without the word ``info``)."""
        score = f"mate {self.mate}" if self.mate is not None else f"cp {self.score_cp}"
        return (f"depth {self.depth} seldepth {self.seldepth} score {score} nodes {self.nodes} "
                f"nps {self.nps} time {int(self.time_s * 1000)} pv {' '.join(self.pv)}")


def score_to_uci(score: int) -> tuple[int | None, int | None]:
    """(centipawns, None) or (None, moves to mate) for a search score."""
    if score > MATE_BOUND:
        return None, (MATE - score + 1) // 2
    if score < -MATE_BOUND:
        return None, -((MATE + score) // 2)
    return score, None


def technique_set(changes: Mapping[str, bool] | None = None) -> frozenset[str]:
    """``DEFAULT_TECHNIQUES`` with ``changes`` (name -> on) applied; ``ValueError`` names an
    unknown technique."""
    chosen = set(DEFAULT_TECHNIQUES)
    for name, on in (changes or {}).items():
        if name not in TECHNIQUES:
            raise ValueError(f"unknown search technique {name!r} (known: {', '.join(TECHNIQUES)})")
        if on:
            chosen.add(name)
        else:
            chosen.discard(name)
    return frozenset(chosen)


class AlphaBeta:
    """The compiled search with its transposition table and scratch, reused move after move.

    ``evaluation``: a name in ``EVALS`` (``"material"``), the path of an NNUE file
    (``alphazero.nets.nnue_file``; ``InputError`` if it is missing or of another kind), or a
    ``FloatNNUE`` (quantised here) or ``QuantisedNNUE``. ``search`` holds no Python objects in the
    loop and runs the compiled iterations without the GIL; one search runs at a time. ``tt_mb`` sizes
    the table (rounded down to a power of two buckets); the table's pages are written here, so a large
    table costs its time now rather than in the first search. ``techniques`` switches the search's
    techniques on or off by name (``TECHNIQUES``) from ``DEFAULT_TECHNIQUES``.

    From another thread, while ``search`` runs: ``abort`` (stop at the next node; the flag stays set
    until ``reset_abort``, so an abort that comes before the search starts is not lost) and
    ``retarget`` (new depth, node and time limits: a ``ponderhit``)."""

    def __init__(self, evaluation: str | FloatNNUE | QuantisedNNUE = "material", tt_mb: float = 16,
                 techniques: Mapping[str, bool] | None = None, window: int = 30) -> None:
        if isinstance(evaluation, str) and evaluation in EVALS:
            self.eval_name = evaluation
            self.info = np.zeros(INFO_SIZE, np.int64)
            self.info[I_EVAL] = EVALS[evaluation]
            self.params, self.acc = material_state()  # the seam's types, empty
        else:
            if isinstance(evaluation, str):
                self.eval_name = evaluation
                evaluation = load_nnue(evaluation)  # InputError for a missing or foreign file
            else:
                self.eval_name = f"nnue {evaluation.meta['features']} {evaluation.meta['arch']} {evaluation.meta['l1']}"
            net = quantise(evaluation) if isinstance(evaluation, FloatNNUE) else evaluation
            if not isinstance(net, QuantisedNNUE):
                raise TypeError(f"evaluation must be a name, a path or an NNUE, got {type(evaluation).__name__}")
            self.info = np.zeros(INFO_SIZE, np.int64)
            self.info[I_EVAL] = EVAL_NNUE
            self.params = pack(net)  # (header int64 [H], weights int16 [W])
            self.acc = new_scratch(net.l1, net.features.max_active, MAX_PLY)  # rows, lists, row_keys by ply; eval cache
        self.tt = self._new_table(tt_mb)  # [2B, 2] key, packed entry
        self.moves = np.zeros((MAX_PLY + 1, K.MAX_MOVES), np.int32)  # [P + 1, 256], the last row the root filter
        self.order = np.zeros((MAX_PLY, K.MAX_MOVES), np.int32)  # [P, 256]
        self.pv = np.zeros((MAX_PLY, MAX_PLY), np.int32)  # [P, P]
        self.pv_len = np.zeros(MAX_PLY, np.int64)  # [P]
        self.killers = np.zeros((MAX_PLY, 2), np.int32)  # [P, 2]
        self.history = np.zeros((2, 64, 64), np.int32)  # [side, from, to]
        # [2, 768, 768] (1 ply back, 2 plies back; (piece, to) then, (piece, to) now): ``conthist``'s tables
        self.cont = np.zeros((2, PIECE_SQUARES, PIECE_SQUARES), np.int16)
        self.evals = np.zeros(MAX_PLY, np.int64)  # [P] static evaluation by ply (NO_EVAL in check)
        self.corr = np.zeros((2, CORR_SIZE), np.int32)  # [2, CORR_SIZE] ``corrhist``'s corrections
        self.techniques = technique_set(techniques)
        self.info[I_OPTIONS] = sum(TECHNIQUES[name] for name in self.techniques)
        self.window = window
        self.last_info = SearchInfo()
        self._max_depth = MAX_PLY - 8
        self._soft_deadline_ns = 0  # no new iteration starts after it (0: none)

    @staticmethod
    def _new_table(tt_mb: float) -> np.ndarray:
        buckets = 1 << max(1, int(math.log2(max(tt_mb, 0.001) * 2**20 / 32)))
        table = np.empty((2 * buckets, 2), np.uint64)
        table.fill(0)  # touch every page now (np.zeros would leave that to the search)
        return table

    def resize(self, tt_mb: float) -> None:
        """A new, empty table of ``tt_mb`` MB (not while a search runs)."""
        self.tt = np.empty((0, 2), np.uint64)  # let the old table go before the new one is written
        self.tt = self._new_table(tt_mb)

    @property
    def table_mb(self) -> float:
        return self.tt.nbytes / 2**20

    def clear(self) -> None:
        """Forget everything learnt (a new game)."""
        self.tt[:] = 0
        self.history[:] = 0
        self.cont[:] = 0
        self.corr[:] = 0
        self.killers[:] = 0
        self.acc[3][:] = 0  # the evaluation cache (nnue_eval): a new game measures from empty tables

    def abort(self) -> None:
        """Stop the running search at its next node (safe from any thread); also stops every later
        search at once until ``reset_abort``."""
        self.info[I_ABORT] = 1

    def reset_abort(self) -> None:
        self.info[I_ABORT] = 0

    def retarget(self, depth: int | None = None, nodes: int | None = None, deadline_ns: int | None = None,
                 soft_deadline_ns: int | None = None) -> None:
        """New limits for the running search (safe from another thread): ``depth`` (iterations),
        ``nodes`` (counted from the search's start), ``deadline_ns`` (hard: the search stops there,
        inside an iteration) and ``soft_deadline_ns`` (no new iteration starts after it), both
        ``time.monotonic_ns`` readings; ``None`` lifts a limit."""
        self._max_depth = min(depth or MAX_PLY - 8, MAX_PLY - 8)
        self._soft_deadline_ns = soft_deadline_ns or 0
        self.info[I_NODE_LIMIT] = nodes if nodes else np.iinfo(np.int64).max
        self.info[I_DEADLINE] = deadline_ns or 0

    def search(self, position: Position | chess.Board, depth: int | None = None, nodes: int | None = None,
               movetime_ms: float | None = None, on_iteration: Callable[[SearchInfo], None] | None = None,
               soft_ms: float | None = None, multipv: int = 1, searchmoves: list[chess.Move] | None = None,
               mate: int | None = None) -> tuple[chess.Move, SearchInfo]:
        """Deepen until ``depth``, ``nodes`` or ``movetime_ms`` runs out (no limit: depth 6).

        ``movetime_ms`` is the hard limit (checked inside an iteration); no iteration starts after
        ``soft_ms`` (default: 0.6 of ``movetime_ms``, as the next one would most likely not finish).
        ``multipv`` K searches the K best root moves as separate lines (each iteration searches the
        best line, then the best line without the moves of the lines before it, ...); ``searchmoves``
        restricts the root to those moves; ``mate`` N stops once the best line mates in N moves or
        fewer. Returns the best move and the info of the last completed iteration (its ``lines`` the
        K lines, best first); ``on_iteration`` gets each iteration's info as it completes.
        ``ValueError`` if the position has no legal move (or none of ``searchmoves`` is legal).
        """
        if isinstance(position, chess.Board):
            position = Position.from_board(position)
        else:
            position = position.copy()
        root_moves = position.legal_moves()
        if searchmoves:
            wanted = {move_from_chess(move) for move in searchmoves}
            root_moves = np.array([m for m in root_moves if int(m) in wanted], np.int32)
        if len(root_moves) == 0:
            raise ValueError(f"no legal move in {position.fen()}" + (" among searchmoves" if searchmoves else ""))
        if depth is None and nodes is None and movetime_ms is None:
            depth = 6
        multipv = max(1, min(multipv, len(root_moves)))
        started = time.monotonic_ns()
        if soft_ms is None and movetime_ms:
            soft_ms = 0.6 * movetime_ms
        self.retarget(depth, nodes, started + int(movetime_ms * 1e6) if movetime_ms else None,
                      started + int(soft_ms * 1e6) if soft_ms else None)
        info = self.info
        info[I_NODES] = 0
        info[I_QNODES] = 0
        info[I_STOPPED] = 0
        info[I_AGE] = (info[I_AGE] + 1) & 255
        self.killers[:] = 0
        self.history //= 4  # keep the shape of the last search, not its weight
        if "conthist" in self.techniques:
            self.cont //= 2
        p = position
        eval_root(info[I_EVAL], p.bb, p.sq, p.st, p.keys, self.params, self.acc)

        best_move = int(root_moves[0])
        result = SearchInfo()
        scores = [0] * multipv  # last iteration's score of each line, the centre of its window
        iteration = 0
        try:
            while iteration < self._max_depth:
                iteration += 1
                lines: list[tuple[int, list[int], int]] = []  # (score, pv, seldepth)
                for k in range(multipv):
                    excluded = {line[1][0] for line in lines}
                    allowed = [int(m) for m in root_moves if int(m) not in excluded]
                    self.moves[ROOT_ROW, :len(allowed)] = allowed
                    info[I_ROOT_MOVES] = len(allowed) if (searchmoves or k > 0) else 0
                    info[I_SELDEPTH] = 0
                    score = search_iteration(p.bb, p.sq, p.st, p.keys, p.undo, self.moves, self.order, self.tt,
                                             self.killers, self.history, self.cont, self.corr, self.pv, self.pv_len, self.evals, info,
                                             self.params, self.acc, iteration, scores[k], self.window)
                    if info[I_STOPPED]:
                        break
                    lines.append((int(score), [int(m) for m in self.pv[0, :self.pv_len[0]]], int(info[I_SELDEPTH])))
                if info[I_STOPPED]:
                    # Keep a deeper best move when this iteration fully searched it: the first line
                    # done, or (stopped inside the first) a root move that beat the last best.
                    deeper = lines[0][1][0] if lines else int(self.pv[0, 0]) if self.pv_len[0] > 0 else None
                    if deeper is not None:
                        best_move = deeper
                        if result.pv and result.pv[0] != move_to_chess(best_move).uci():
                            result.pv = [move_to_chess(best_move).uci()]
                            result.lines = [result, *result.lines[1:]]
                    break
                lines.sort(key=lambda line: -line[0])  # a later line can beat an earlier one's window
                scores = [line[0] for line in lines] + scores[len(lines):]
                elapsed = (time.monotonic_ns() - started) / 1e9
                infos = []
                for score, pv, seldepth in lines:
                    cp, mate_in = score_to_uci(score)
                    infos.append(SearchInfo(depth=iteration, seldepth=seldepth, score_cp=cp, mate=mate_in,
                                            nodes=int(info[I_NODES]), time_s=elapsed,
                                            pv=[move_to_chess(m).uci() for m in pv]))
                result = infos[0]
                result.lines = infos
                best_move = lines[0][1][0]
                if on_iteration is not None:
                    on_iteration(result)
                if self._soft_deadline_ns and time.monotonic_ns() >= self._soft_deadline_ns:
                    break  # the next iteration would most likely not finish
                if result.mate is not None and result.mate > 0 and mate is not None and result.mate <= mate:
                    break  # the mate asked for
                if multipv == 1 and result.mate is not None and iteration >= 2 * abs(result.mate) + 1:
                    break  # a mate no deeper search can shorten
        finally:
            info[I_ROOT_MOVES] = 0
        result.nodes = int(info[I_NODES])
        result.time_s = (time.monotonic_ns() - started) / 1e9
        self.last_info = result
        return move_to_chess(best_move), result

