"""PUCT Monte Carlo tree search in compiled code: array trees for many games, one network call per round.

Owns the compiled search: a forest of array trees with a batch dimension (one row per game, as
mctx's ``Tree``), the numba functions that select a leaf in every game, encode it straight from the
kernel's arrays into a preallocated batch of planes, expand it from the network's logits and back the
value up, and ``CompiledMCTS``, the Python driver with ``MCTS.search``'s interface. Knows the
position only as ``alphazero.board.kernel``'s arrays and the network only through a *plane
evaluator* (``forward(planes) -> (logits, values)``, which ``NetworkEvaluator`` already is); knows
nothing of torch or Ray.

The algorithm is ``alphazero.search.mcts``'s PUCT, operation for operation (its docstring has the
formula): the same selection (tried moves in the order first tried, then the best untried one at
first-play urgency, ties to the earlier), the same virtual loss, the same terminal rules (checkmate,
stalemate, insufficient material, fifty moves, threefold repetition over the game, a position
repeating one earlier in the tree as a draw, and a position whose mover can mate in one as a win), the same root Dirichlet noise and move sampling drawn
from the tree's generator, the same tree reuse. Moves are kept in ``alphazero.board.movegen``'s order
(``alphazero.board.move_order``) and priors are softmaxed as ``masked_softmax`` does, sums in numpy's
pairwise order, so with the same evaluator and seed both searches return the same visit counts and
the same moves (the tests check it, and self-play records come out byte for byte the same).
Differences: Gumbel is not implemented (``algorithm: gumbel`` is refused); the kernel's threefold
check tells an en-passant right that only a pin makes illegal apart where python-chess does not (see
``kernel``); a search may go at most ``MAX_DEPTH`` plies below its root.

``CompiledGameTree`` has ``GameTree``'s interface for its users (``board``, ``rng``, ``advance``;
``root_priors`` and ``principal_variation()`` for tools) but no ``root`` of Python ``Node``s: the
tree lives in a slot of its search's ``Forest``, taken at its first search, given back when the tree
object is collected, and reloaded from ``board`` whenever the board moved on other than by ``advance``.

Layout (``B`` game slots, ``N`` node and ``E`` edge capacity per slot, grown by doubling)
============ ===================== ===================================================================
array        shape, dtype          content
============ ===================== ===================================================================
``nodes_i``  [B, N, 9] int32       ``NI_EDGE_START`` (first edge, -1 before expansion), ``NI_NUM_EDGES``
                                   (legal moves K), ``NI_VISITS`` N(s) (virtual visits included),
                                   ``NI_STATE`` (``FRESH``, ``PENDING`` waiting for the network,
                                   ``EXPANDED``, ``TERMINAL``), ``NI_PARENT`` / ``NI_PARENT_EDGE`` (-1
                                   at the root, always node 0), ``NI_NUM_TRIED``, ``NI_CURSOR``
                                   (position in the prior order before which every move was tried),
                                   ``NI_WIN`` (a root's mating move, local, -1 if none: ``mate_in_one``)
``nodes_f``  [B, N, 3] float64     ``NF_VALUE_SUM`` (for the node's mover), ``NF_TERMINAL`` (the true
                                   result for the mover), ``NF_RAW`` (the network's value)
``edges_i``  [B, E, 6] int32       ``EI_MOVE`` (kernel int), ``EI_ACTION`` (policy index),
                                   ``EI_CHILD`` (node, -1 until first tried), ``EI_VISITS`` N(s, a),
                                   ``EI_ORDER`` (the node's j-th move by descending selection prior,
                                   a local index), ``EI_TRIED`` (its j-th tried move, local)
``edges_f``  [B, E, 3] float64     ``EF_VALUE`` W(s, a) for the node's mover (virtual loss included),
                                   ``EF_PRIOR`` (the network's, a float32 value), ``EF_SEL_PRIOR``
                                   (what selection uses: the root's noisy priors)
``trees``    [B, 3] int64          ``T_NUM_NODES``, ``T_NUM_EDGES`` in use, ``T_ROOT_PLY`` (the
                                   kernel's ``ST_PLY`` at the root)
``bb`` ...   [B, ...]              each slot's kernel position (``bb`` [14], ``sq`` [64], ``st`` [6],
                                   ``keys`` [H], ``undo`` [H, 5]: the kernel's layout), at the root
                                   between calls; selection descends with make/unmake
``planes``   [R, 24, 8, 8] uint8   the round's leaves, encoded (``alphazero.board.encoding``'s table);
                                   the compiled code writes it as ``rows`` [R, 24, 8] uint64, a rank
                                   (8 bytes, little-endian) at a time
============ ===================== ===================================================================

A node's edges are the range ``[NI_EDGE_START, + NI_NUM_EDGES)`` of its slot's edge arrays, written
when the node is first reached (its legal moves and their actions) and filled in when the network
answers. Values are for the side to move at the node and change sign at each step up, as in ``mcts``.

Memory: the capacities are common to all slots (48 bytes an edge, ~35 edges a node), so one search
object should hold games of similar size; one long search (UCI) takes one slot.

Cost: about 4 microseconds of one CPU per simulation with a free evaluator, encoding, Python driver
and ``advance`` included (``alphazero.bench.search``; the Python search: 80-115); the network
call per round is the only synchronisation point. Compilation is cached (``cache=True``): the first
process compiles for ~30 s, later ones load the machine code in ~1 s. A cached function must not be
recursive (numba's cache then loads a crashing copy; ``_pairwise_sum`` is written out for that).
Numba checks a cache entry against its own source file only: after editing ``alphazero/board/
kernel.py``, ``bits.py``, ``move_order.py`` or ``encode_kernel.py``, delete
``alphazero/search/__pycache__/compiled_mcts*`` too, or this module keeps the old board compiled in.
"""

from __future__ import annotations

import math
import weakref
from typing import Any, Protocol, Sequence

import chess
import numpy as np
from numba import njit

from alphazero.board import kernel as K
from alphazero.board.bits import lsb
from alphazero.board.encode_kernel import NUM_ACTIONS, encode_rows, move_action, plane_rows
from alphazero.board.kernel import (
    HISTORY,
    MAX_MOVES,
    NO_SQUARE,
    ST_EP,
    ST_HALFMOVE,
    ST_PLY,
    ST_SIDE,
    U_EP,
    Z_EP,
    generate_moves,
    in_check,
    insufficient_material,
    make_move,
    repetitions,
    unmake_move,
)
from alphazero.board.move_order import ordered_moves
from alphazero.board.position import SEARCH_RESERVE, castling_bits, move_from_chess, replayed_start, why_unsupported
from alphazero.config import SearchConfig
from alphazero.search.mcts import SearchResult

NI_EDGE_START, NI_NUM_EDGES, NI_VISITS, NI_STATE, NI_PARENT, NI_PARENT_EDGE, NI_NUM_TRIED, NI_CURSOR, NI_WIN = range(9)
NODE_I = 9
NF_VALUE_SUM, NF_TERMINAL, NF_RAW = range(3)
NODE_F = 3
EI_MOVE, EI_ACTION, EI_CHILD, EI_VISITS, EI_ORDER, EI_TRIED = range(6)
EDGE_I = 6
EF_VALUE, EF_PRIOR, EF_SEL_PRIOR = range(3)
EDGE_F = 3
T_NUM_NODES, T_NUM_EDGES, T_ROOT_PLY = range(3)
TREE_SIZE = 3
FRESH, PENDING, EXPANDED, TERMINAL = 0, 1, 2, 3
# Parameters handed to the compiled functions as one float64 array.
P_C_PUCT, P_C_BASE, P_FPU, P_VIRTUAL_LOSS, P_TWOFOLD, P_LEAVES_PER_GAME, P_MATE_IN_ONE = range(7)
NUM_PARAMS = 7
# What one selection found.
SELECT_COLLISION, SELECT_TERMINAL, SELECT_REQUEST, SELECT_TOO_DEEP = 0, 1, 2, 3
MAX_DEPTH = SEARCH_RESERVE - 16  # plies below the root; the kernel keeps SEARCH_RESERVE free


class PlaneEvaluator(Protocol):
    """The compiled search's seam to the network: planes in, logits and values out.

    ``forward(planes)``: ``uint8 [R, 24, 8, 8]`` (``alphazero.board.encoding``'s planes, side-to-move
    frame; the array is the search's buffer, valid only during the call) -> ``(logits float32 [R,
    4672], values float32 [R])``, values in [-1, 1] for the side to move. The search softmaxes each
    leaf's logits over its legal moves itself (as ``masked_softmax``). ``NetworkEvaluator`` is one.
    """

    def forward(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


class UniformPlaneEvaluator:
    """Logits 0 (equal priors over the legal moves) and value 0 for every position, at no cost.

    ``UniformEvaluator``'s twin behind the plane seam: the benchmark of the search's own cost.
    """

    def __init__(self) -> None:
        self._logits = np.zeros((0, NUM_ACTIONS), np.float32)
        self._values = np.zeros(0, np.float32)

    def forward(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        count = len(planes)
        if len(self._logits) < count:
            self._logits = np.zeros((count, NUM_ACTIONS), np.float32)
            self._values = np.zeros(count, np.float32)
        return self._logits[:count], self._values[:count]


# ----------------------------------------------------------------------------------------------
# Compiled core

@njit(cache=True)
def _pairwise_block(a, lo, n):
    """numpy's pairwise summation of ``a[lo:lo + n]`` for ``n <= 128`` (``pairwise_sum``, bit for bit)."""
    if n < 8:
        total = -0.0
        for i in range(n):
            total += a[lo + i]
        return total
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    stop = n - n % 8
    while i < stop:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        total += a[lo + i]
        i += 1
    return total


@njit(cache=True, inline="always")
def _half(n):
    half = n // 2
    return half - half % 8


@njit(cache=True)
def _pairwise_mid(a, lo, n):
    if n <= 128:
        return _pairwise_block(a, lo, n)
    half = _half(n)
    return _pairwise_block(a, lo, half) + _pairwise_block(a, lo + half, n - half)


@njit(cache=True)
def _pairwise_sum(a, lo, n):
    """numpy's pairwise summation of ``a[lo:lo + n]`` for ``n <= 480`` (blocks of at most 128, halves
    split at a multiple of 8). Two levels written out: numba's cache cannot hold a recursive function."""
    if n <= 128:
        return _pairwise_block(a, lo, n)
    half = _half(n)
    return _pairwise_mid(a, lo, half) + _pairwise_mid(a, lo + half, n - half)


@njit(cache=True)
def softmax_over(logits_row, edges_i, edges_f, g, start, count, scratch):
    """Priors over a node's legal moves from its row of logits, as ``masked_softmax`` computes them:
    float64 max-shifted exponentials, summed as ``np.add.reduceat`` sums (first element, then the
    pairwise sum of the rest), divided and rounded to float32. Written to ``EF_PRIOR``/``EF_SEL_PRIOR``."""
    top = -np.inf
    for k in range(count):
        x = np.float64(logits_row[edges_i[g, start + k, EI_ACTION]])
        scratch[k] = x
        if x > top:
            top = x
    for k in range(count):
        scratch[k] = np.exp(scratch[k] - top)
    total = scratch[0]
    if count > 1:
        total += _pairwise_sum(scratch, 1, count - 1)
    if not total > 0:
        total = 1.0
    for k in range(count):
        prior = np.float64(np.float32(scratch[k] / total))
        edges_f[g, start + k, EF_PRIOR] = prior
        edges_f[g, start + k, EF_SEL_PRIOR] = prior


@njit(cache=True)
def sort_by_prior(edges_i, edges_f, g, start, count):
    """``EI_ORDER``: local move indices by descending ``EF_SEL_PRIOR``, ties in move order
    (``np.argsort(-priors, kind="stable")``)."""
    for k in range(count):
        prior = edges_f[g, start + k, EF_SEL_PRIOR]
        j = k
        while j > 0 and edges_f[g, start + edges_i[g, start + j - 1, EI_ORDER], EF_SEL_PRIOR] < prior:
            edges_i[g, start + j, EI_ORDER] = edges_i[g, start + j - 1, EI_ORDER]
            j -= 1
        edges_i[g, start + j, EI_ORDER] = k


@njit(cache=True)
def _new_node(nodes_i, nodes_f, trees, g, parent, parent_edge):
    node = trees[g, T_NUM_NODES]
    trees[g, T_NUM_NODES] = node + 1
    nodes_i[g, node, NI_EDGE_START] = -1
    nodes_i[g, node, NI_NUM_EDGES] = 0
    nodes_i[g, node, NI_VISITS] = 0
    nodes_i[g, node, NI_STATE] = FRESH
    nodes_i[g, node, NI_PARENT] = parent
    nodes_i[g, node, NI_PARENT_EDGE] = parent_edge
    nodes_i[g, node, NI_NUM_TRIED] = 0
    nodes_i[g, node, NI_CURSOR] = 0
    nodes_i[g, node, NI_WIN] = -1
    nodes_f[g, node, NF_VALUE_SUM] = 0.0
    nodes_f[g, node, NF_TERMINAL] = 0.0
    nodes_f[g, node, NF_RAW] = 0.0
    return node


@njit(cache=True, inline="always")
def _try(nodes_i, nodes_f, edges_i, trees, g, node, start, i):
    """Give the node's move ``i`` (local) a child and append it to the tried list."""
    tried = nodes_i[g, node, NI_NUM_TRIED]
    edges_i[g, start + tried, EI_TRIED] = i
    nodes_i[g, node, NI_NUM_TRIED] = tried + 1
    edges_i[g, start + i, EI_CHILD] = _new_node(nodes_i, nodes_f, trees, g, node, start + i)


@njit(cache=True)
def _backup(nodes_i, nodes_f, edges_f, g, leaf, value, virtual_loss):
    """Add ``value`` (for the leaf's mover) to the leaf and, negated at each step, to its ancestors
    (``MCTS._backup``; interior visits were counted on the way down)."""
    nodes_i[g, leaf, NI_VISITS] += 1
    nodes_f[g, leaf, NF_VALUE_SUM] += value
    node = leaf
    while True:
        parent = nodes_i[g, node, NI_PARENT]
        if parent < 0:
            return
        edge = nodes_i[g, node, NI_PARENT_EDGE]
        value = -value
        edges_f[g, edge, EF_VALUE] += virtual_loss + value
        nodes_f[g, parent, NF_VALUE_SUM] += value
        node = parent


@njit(cache=True, inline="always")
def _tree_key(keys, undo, st, ply, current):
    """The position key at ``ply`` without its en-passant part (``mcts.position_key`` ignores it)."""
    key = keys[ply]
    ep = st[ST_EP] if current else undo[ply, U_EP]
    if ep != NO_SQUARE:
        key ^= Z_EP[ep & 7]
    return key


@njit(cache=True)
def mating_move(bb, sq, st, keys, undo, moves, count):
    """Index in ``moves[:count]`` (the legal moves) of the first that checkmates, else -1
    (``movegen.mating_move_index``): each move is played, and only a check has its replies generated."""
    replies = np.empty(0, np.int32)
    for k in range(count):
        make_move(bb, sq, st, keys, undo, moves[k])
        mate = False
        if in_check(bb, st):
            if len(replies) == 0:
                replies = np.empty(MAX_MOVES, np.int32)
            mate = generate_moves(bb, sq, st, replies, False) == 0
        unmake_move(bb, sq, st, undo)
        if mate:
            return k
    return -1


@njit(cache=True)
def _reach(nodes_i, nodes_f, edges_i, edges_f, trees, g, node, depth, twofold, mate_in_one, bb, sq, st, keys, undo,
           moves, rows):
    """First arrival at a fresh node of slot ``g``, its board (the slot's kernel arrays) standing there:
    its terminal status, else its legal moves as edges and its planes in ``rows`` (uint64 [24, 8]).
    With ``mate_in_one`` a node below the root whose mover can mate is a win (terminal, +1) and the
    root (``depth`` 0) keeps its mating move in ``NI_WIN``. Returns True when the node now waits for
    the network."""
    count = ordered_moves(bb, sq, st, moves)
    halfmove = st[ST_HALFMOVE]
    terminal = True
    value = 0.0
    if count == 0:
        if in_check(bb, st):
            value = -1.0
    elif insufficient_material(bb):
        pass
    elif halfmove >= 100:
        pass
    elif halfmove >= 8 and repetitions(st, keys) >= 2:
        pass
    else:
        terminal = False
        if twofold:
            ply = st[ST_PLY]
            key = _tree_key(keys, undo, st, ply, True)
            for distance in range(4, min(depth, halfmove) + 1, 2):
                if _tree_key(keys, undo, st, ply - distance, False) == key:
                    terminal = True
                    break
    win = -1
    if not terminal and mate_in_one:
        win = mating_move(bb, sq, st, keys, undo, moves, count)
        if win >= 0 and depth > 0:
            terminal = True
            value = 1.0
    if terminal:
        nodes_i[g, node, NI_STATE] = TERMINAL
        nodes_f[g, node, NF_TERMINAL] = value
        return False
    nodes_i[g, node, NI_WIN] = win
    start = trees[g, T_NUM_EDGES]
    trees[g, T_NUM_EDGES] = start + count
    flip = 56 if st[ST_SIDE] == K.BLACK else 0
    for k in range(count):
        edge = start + k
        edges_i[g, edge, EI_MOVE] = moves[k]
        edges_i[g, edge, EI_ACTION] = move_action(moves[k], flip)
        edges_i[g, edge, EI_CHILD] = -1
        edges_i[g, edge, EI_VISITS] = 0
        edges_f[g, edge, EF_VALUE] = 0.0
    nodes_i[g, node, NI_EDGE_START] = start
    nodes_i[g, node, NI_NUM_EDGES] = count
    nodes_i[g, node, NI_STATE] = PENDING
    encode_rows(bb, sq, st, moves, count, rows)
    return True


@njit(cache=True)
def _select(params, nodes_i, nodes_f, edges_i, edges_f, trees, bb, sq, st, keys, undo, g, moves, planes,
            request):
    """Descend from the root of slot ``g`` to a leaf, adding virtual visits (``MCTS._select``).

    Returns ``(what, leaf)``: ``SELECT_REQUEST`` (the leaf's planes are in ``planes[request]``, the
    ``rows`` view of the round's planes),
    ``SELECT_TERMINAL``, ``SELECT_COLLISION`` (the leaf already waits; virtual visits undone) or
    ``SELECT_TOO_DEEP``. The slot's board is back at the root on return.
    """
    c_puct = params[P_C_PUCT]
    c_base = params[P_C_BASE]
    fpu_reduction = params[P_FPU]
    virtual_loss = params[P_VIRTUAL_LOSS]
    twofold = params[P_TWOFOLD] != 0.0
    mate_in_one = params[P_MATE_IN_ONE] != 0.0
    board_bb, board_sq, board_st, board_keys, board_undo = bb[g], sq[g], st[g], keys[g], undo[g]
    node = 0
    depth = 0
    what = SELECT_REQUEST
    while True:
        state = nodes_i[g, node, NI_STATE]
        if state == TERMINAL:
            what = SELECT_TERMINAL
            break
        if state != EXPANDED:
            if state == PENDING:
                child = node
                while True:
                    parent = nodes_i[g, child, NI_PARENT]
                    if parent < 0:
                        break
                    edge = nodes_i[g, child, NI_PARENT_EDGE]
                    nodes_i[g, parent, NI_VISITS] -= 1
                    edges_i[g, edge, EI_VISITS] -= 1
                    edges_f[g, edge, EF_VALUE] += virtual_loss
                    child = parent
                what = SELECT_COLLISION
                break
            if _reach(nodes_i, nodes_f, edges_i, edges_f, trees, g, node, depth, twofold, mate_in_one, board_bb,
                      board_sq, board_st, board_keys, board_undo, moves, planes[request]):
                what = SELECT_REQUEST
            else:
                what = SELECT_TERMINAL
            break
        if depth >= MAX_DEPTH:
            what = SELECT_TOO_DEEP
            break
        start = nodes_i[g, node, NI_EDGE_START]
        count = nodes_i[g, node, NI_NUM_EDGES]
        best = nodes_i[g, node, NI_WIN]
        if best >= 0:  # a root that can mate searches its mate only (mate_in_one)
            if edges_i[g, start + best, EI_CHILD] < 0:
                _try(nodes_i, nodes_f, edges_i, trees, g, node, start, best)
        else:
            # PUCT: Q + U over the tried moves and the best untried one (all untried share the FPU).
            parent_visits = nodes_i[g, node, NI_VISITS]
            if c_base > 0:
                c = c_puct + math.log((parent_visits + c_base + 1) / c_base)
            else:
                c = c_puct
            scale = c * math.sqrt(parent_visits)
            best = -1
            best_score = -np.inf
            for j in range(nodes_i[g, node, NI_NUM_TRIED]):
                i = edges_i[g, start + j, EI_TRIED]
                edge = start + i
                n = edges_i[g, edge, EI_VISITS]
                q = edges_f[g, edge, EF_VALUE] / n if n else 0.0
                score = q + scale * edges_f[g, edge, EF_SEL_PRIOR] / (1 + n)
                if score > best_score:
                    best = i
                    best_score = score
            cursor = nodes_i[g, node, NI_CURSOR]
            while cursor < count and edges_i[g, start + edges_i[g, start + cursor, EI_ORDER], EI_CHILD] >= 0:
                cursor += 1
            nodes_i[g, node, NI_CURSOR] = cursor
            if cursor < count:
                i = edges_i[g, start + cursor, EI_ORDER]
                first_play = nodes_f[g, node, NF_VALUE_SUM] / parent_visits - fpu_reduction
                if first_play + scale * edges_f[g, start + i, EF_SEL_PRIOR] > best_score:
                    best = i
                    _try(nodes_i, nodes_f, edges_i, trees, g, node, start, i)
        edge = start + best
        nodes_i[g, node, NI_VISITS] += 1
        edges_i[g, edge, EI_VISITS] += 1
        edges_f[g, edge, EF_VALUE] -= virtual_loss
        make_move(board_bb, board_sq, board_st, board_keys, board_undo, edges_i[g, edge, EI_MOVE])
        depth += 1
        node = edges_i[g, edge, EI_CHILD]
    for _ in range(depth):
        unmake_move(board_bb, board_sq, board_st, board_undo)
    return what, node


@njit(cache=True)
def collect_leaves(slots, remaining, params, nodes_i, nodes_f, edges_i, edges_f, trees, bb, sq, st, keys,
                   undo, planes, request_slots, request_nodes, moves):
    """One round of selection in every game with budget left (``MCTS.search``'s inner loop).

    Each game collects up to ``leaves_per_game`` leaves for the network; terminal leaves back up at
    once (and do not count towards it); a collision ends the game's round. Returns ``(requests,
    left, most_edges)``: the number of leaves written to ``planes``/``request_*``, whether any game
    has budget left, and the largest edge count in use (the driver grows the arrays from it).
    ``remaining`` (int64 [G]) is decremented in place; -1 in it afterwards marks a search too deep.
    """
    leaves_per_game = int(params[P_LEAVES_PER_GAME])
    virtual_loss = params[P_VIRTUAL_LOSS]
    requests = 0
    for j in range(len(slots)):
        g = slots[j]
        collected = 0
        while remaining[j] > 0 and collected < leaves_per_game:
            what, leaf = _select(params, nodes_i, nodes_f, edges_i, edges_f, trees, bb, sq, st, keys, undo, g,
                                 moves, planes, requests)
            if what == SELECT_COLLISION:
                break
            if what == SELECT_TOO_DEEP:
                remaining[j] = -1
                break
            remaining[j] -= 1
            if what == SELECT_TERMINAL:
                _backup(nodes_i, nodes_f, edges_f, g, leaf, nodes_f[g, leaf, NF_TERMINAL], virtual_loss)
            else:
                request_slots[requests] = g
                request_nodes[requests] = leaf
                requests += 1
                collected += 1
    left = False
    most_edges = 0
    for j in range(len(slots)):
        if remaining[j] > 0:
            left = True
        most_edges = max(most_edges, trees[slots[j], T_NUM_EDGES])
    return requests, left, most_edges


@njit(cache=True)
def expand_leaves(count, request_slots, request_nodes, logits, values, params, nodes_i, nodes_f, edges_i,
                  edges_f, scratch):
    """The network's answer for ``count`` leaves: priors over each leaf's moves, then the backup of its value."""
    virtual_loss = params[P_VIRTUAL_LOSS]
    for r in range(count):
        g = request_slots[r]
        leaf = request_nodes[r]
        start = nodes_i[g, leaf, NI_EDGE_START]
        moves = nodes_i[g, leaf, NI_NUM_EDGES]
        softmax_over(logits[r], edges_i, edges_f, g, start, moves, scratch)  # children, visits, W: set by _reach
        sort_by_prior(edges_i, edges_f, g, start, moves)
        nodes_i[g, leaf, NI_NUM_TRIED] = 0
        nodes_i[g, leaf, NI_CURSOR] = 0
        nodes_i[g, leaf, NI_STATE] = EXPANDED
        value = np.float64(values[r])
        nodes_f[g, leaf, NF_RAW] = value
        _backup(nodes_i, nodes_f, edges_f, g, leaf, value, virtual_loss)


@njit(cache=True)
def collect_roots(slots, nodes_i, nodes_f, edges_i, edges_f, trees, bb, sq, st, keys, undo, planes, request_slots,
                  request_nodes, moves, mate_in_one):
    """Every root not expanded yet, reset and encoded for one network call (``MCTS._expand_roots``).

    Returns ``(requests, finished)``: ``finished`` is the index in ``slots`` of a game that is over
    (the driver raises), -1 if none.
    """
    requests = 0
    for j in range(len(slots)):
        g = slots[j]
        if nodes_i[g, 0, NI_STATE] == EXPANDED:
            continue
        # A reused node may have been a draw by repetition inside the old tree; as a root it is not.
        nodes_i[g, 0, NI_STATE] = FRESH
        nodes_i[g, 0, NI_VISITS] = 0
        nodes_f[g, 0, NF_VALUE_SUM] = 0.0
        if not _reach(nodes_i, nodes_f, edges_i, edges_f, trees, g, 0, 0, False, mate_in_one, bb[g], sq[g], st[g], keys[g],
                      undo[g], moves, planes[requests]):
            return requests, j
        request_slots[requests] = g
        request_nodes[requests] = 0
        requests += 1
    return requests, -1


@njit(cache=True)
def set_root_priors(slots, draws, offsets, epsilon, nodes_i, edges_i, edges_f):
    """Each root's selection priors, then its prior order again from the first move (``set_selection_priors``).

    Where ``draws[offsets[j]:offsets[j + 1]]`` (Dirichlet noise, float64) is not empty the priors are
    ``((1 - epsilon) * priors + epsilon * noise).astype(float32)`` as numpy evaluates it (the first
    product in float32: a Python float times a float32 array), else the network's own.
    """
    keep = np.float32(1.0 - epsilon)
    for j in range(len(slots)):
        g = slots[j]
        start = nodes_i[g, 0, NI_EDGE_START]
        count = nodes_i[g, 0, NI_NUM_EDGES]
        noisy = offsets[j + 1] - offsets[j] == count
        for k in range(count):
            prior = edges_f[g, start + k, EF_PRIOR]
            if noisy:
                kept = np.float64(keep * np.float32(prior))
                prior = np.float64(np.float32(kept + epsilon * draws[offsets[j] + k]))
            edges_f[g, start + k, EF_SEL_PRIOR] = prior
        sort_by_prior(edges_i, edges_f, g, start, count)
        nodes_i[g, 0, NI_CURSOR] = 0


@njit(cache=True)
def root_statistics(slots, nodes_i, nodes_f, edges_i, edges_f, offsets, moves, visits, pi, priors, root_values,
                    most_visits):
    """Each root's moves, visit counts (1 for a lone move never searched), ``pi`` (float32 share of the
    visits), network priors (all flat over ``offsets`` [G + 1]), mean value clipped to [-1, 1] and
    largest visit count; as ``MCTS._result`` computes them."""
    for j in range(len(slots)):
        g = slots[j]
        start = nodes_i[g, 0, NI_EDGE_START]
        first = offsets[j]
        count = offsets[j + 1] - first
        total = 0
        most = 0
        for k in range(count):
            moves[first + k] = edges_i[g, start + k, EI_MOVE]
            visits[first + k] = edges_i[g, start + k, EI_VISITS]
            priors[first + k] = np.float32(edges_f[g, start + k, EF_PRIOR])
            total += visits[first + k]
            most = max(most, visits[first + k])
        if total == 0 and count == 1:
            visits[first] = 1
            total = most = 1
        for k in range(count):
            pi[first + k] = np.float32(visits[first + k] / total) if total else np.float32(np.nan)
        most_visits[j] = most
        n = nodes_i[g, 0, NI_VISITS]
        value = nodes_f[g, 0, NF_VALUE_SUM] / n if n else 0.0
        root_values[j] = min(max(value, -1.0), 1.0)


@njit(cache=True)
def choose_moves(visits, offsets, temperatures, uniforms, chosen):
    """Each game's move index from its visit counts, as ``choose_move_index``: the first most visited
    at temperature 0, else ``rng.choice`` over ``N^(1/T)`` replayed with the uniform draw
    ``uniforms[j]`` (the cumulative sum normalised by its last entry, the first entry above the draw).
    ``chosen[j]`` is left alone where the counts are all 0 (the driver draws the move itself)."""
    weights = np.zeros(MAX_MOVES, np.float64)
    for j in range(len(temperatures)):
        first = offsets[j]
        count = offsets[j + 1] - first
        most = 0
        best = 0
        for k in range(count):
            if visits[first + k] > most:
                most = visits[first + k]
                best = k
        temperature = temperatures[j]
        if temperature <= 0:
            chosen[j] = best
            continue
        if most <= 0:
            continue
        power = 1.0 / temperature
        for k in range(count):
            x = visits[first + k] / most
            if power == 1.0:
                weights[k] = x
            elif power == 2.0:
                weights[k] = x * x
            elif power == 0.5:
                weights[k] = math.sqrt(x)
            else:
                weights[k] = x ** power
        total = _pairwise_sum(weights, 0, count)  # np.sum: pairwise over all (reduceat starts from the first)
        cumulative = 0.0
        for k in range(count):  # p = weights / total, cdf = cumsum(p)
            cumulative += weights[k] / total
            weights[k] = cumulative
        last = weights[count - 1]
        index = count
        for k in range(count):
            if weights[k] / last > uniforms[j]:
                index = k
                break
        chosen[j] = index


@njit(cache=True)
def root_sizes(slots, nodes_i, sizes):
    for j in range(len(slots)):
        sizes[j] = nodes_i[slots[j], 0, NI_NUM_EDGES] if nodes_i[slots[j], 0, NI_STATE] == EXPANDED else 0


@njit(cache=True)
def advance_tree(g, move, reuse, nodes_i, nodes_f, edges_i, edges_f, trees, bb, sq, st, keys, undo,
                 scratch_nodes_i, scratch_nodes_f, scratch_edges_i, scratch_edges_f, queue):
    """Play ``move`` (legal) on slot ``g``'s board; keep its subtree as the new tree when ``reuse``
    (copied breadth first to the front of the slot's arrays), else start an empty tree."""
    child = -1
    if reuse and nodes_i[g, 0, NI_STATE] == EXPANDED:
        start = nodes_i[g, 0, NI_EDGE_START]
        for k in range(nodes_i[g, 0, NI_NUM_EDGES]):
            if edges_i[g, start + k, EI_MOVE] == move:
                child = edges_i[g, start + k, EI_CHILD]
                break
    make_move(bb[g], sq[g], st[g], keys[g], undo[g], move)
    trees[g, T_ROOT_PLY] = st[g, ST_PLY]
    if child < 0:
        trees[g, T_NUM_NODES] = 0
        trees[g, T_NUM_EDGES] = 0
        _new_node(nodes_i, nodes_f, trees, g, -1, -1)
        return
    # Breadth first: new node ids in discovery order, each node's edges copied as one range (the
    # local indices in EI_ORDER / EI_TRIED stay valid). Element by element: a slice is a view with a
    # reference count, dearer than the copy itself.
    queue[0] = child
    num_nodes = 1
    num_edges = 0
    head = 0
    while head < num_nodes:
        old = queue[head]
        new = head
        head += 1
        for f in range(NODE_I):
            scratch_nodes_i[new, f] = nodes_i[g, old, f]
        for f in range(NODE_F):
            scratch_nodes_f[new, f] = nodes_f[g, old, f]
        old_start = nodes_i[g, old, NI_EDGE_START]
        if old_start < 0:
            continue
        count = nodes_i[g, old, NI_NUM_EDGES]
        scratch_nodes_i[new, NI_EDGE_START] = num_edges
        for k in range(count):
            edge = num_edges + k
            for f in range(EDGE_I):
                scratch_edges_i[edge, f] = edges_i[g, old_start + k, f]
            for f in range(EDGE_F):
                scratch_edges_f[edge, f] = edges_f[g, old_start + k, f]
            grandchild = scratch_edges_i[edge, EI_CHILD]
            if grandchild >= 0:
                queue[num_nodes] = grandchild
                scratch_edges_i[edge, EI_CHILD] = num_nodes
                num_nodes += 1
        num_edges += count
    # Parents: the root has none; every other node's parent is the node whose edge points at it.
    scratch_nodes_i[0, NI_PARENT] = -1
    scratch_nodes_i[0, NI_PARENT_EDGE] = -1
    for node in range(num_nodes):
        start = scratch_nodes_i[node, NI_EDGE_START]
        if start < 0:
            continue
        for k in range(scratch_nodes_i[node, NI_NUM_EDGES]):
            kid = scratch_edges_i[start + k, EI_CHILD]
            if kid >= 0:
                scratch_nodes_i[kid, NI_PARENT] = node
                scratch_nodes_i[kid, NI_PARENT_EDGE] = start + k
    for node in range(num_nodes):
        for f in range(NODE_I):
            nodes_i[g, node, f] = scratch_nodes_i[node, f]
        for f in range(NODE_F):
            nodes_f[g, node, f] = scratch_nodes_f[node, f]
    for edge in range(num_edges):
        for f in range(EDGE_I):
            edges_i[g, edge, f] = scratch_edges_i[edge, f]
        for f in range(EDGE_F):
            edges_f[g, edge, f] = scratch_edges_f[edge, f]
    trees[g, T_NUM_NODES] = num_nodes
    trees[g, T_NUM_EDGES] = num_edges


@njit(cache=True)
def load_slot(g, pieces, side, castling, ep, halfmove_start, fullmove, moves, halfmove, bb, sq, st, keys, undo,
              trees, nodes_i, nodes_f):
    """Set slot ``g`` to a position (``pieces`` uint64 [12] by piece code, the ``st`` scalars) followed by
    ``moves`` (int32, ``NO_MOVE`` a pass), as ``Position.from_board`` does, with an empty tree."""
    bb[g, :] = 0
    sq[g, :] = K.EMPTY
    for code in range(12):
        bits = pieces[code]
        bb[g, code] = bits
        bb[g, K.OCC_WHITE + code // 6] |= bits
        while bits:
            sq[g, lsb(bits)] = code
            bits &= bits - np.uint64(1)
    st[g, ST_SIDE] = side
    st[g, K.ST_CASTLING] = castling
    st[g, ST_EP] = NO_SQUARE
    if ep != NO_SQUARE and K.PAWN_ATTACKS[1 - side, ep] & bb[g, 6 * side + K.PAWN]:
        st[g, ST_EP] = ep  # kept only where a pawn of the side to move stands ready (the kernel's invariant)
    st[g, ST_HALFMOVE] = halfmove_start
    st[g, K.ST_FULLMOVE] = fullmove
    st[g, ST_PLY] = 0
    keys[g, 0] = K.compute_key(bb[g], st[g])
    for move in moves:
        if move == K.NO_MOVE:
            K.make_null(st[g], keys[g], undo[g])
        else:
            make_move(bb[g], sq[g], st[g], keys[g], undo[g], move)
    st[g, ST_HALFMOVE] = halfmove  # a replayed pass zeroed the clock; python-chess does not
    trees[g, T_NUM_NODES] = 0
    trees[g, T_NUM_EDGES] = 0
    trees[g, T_ROOT_PLY] = st[g, ST_PLY]
    _new_node(nodes_i, nodes_f, trees, g, -1, -1)


@njit(cache=True)
def principal_line(g, nodes_i, edges_i, out):
    """The most visited line from the root of slot ``g`` (first of equals), as kernel moves; returns its length."""
    node = 0
    length = 0
    while length < len(out) and nodes_i[g, node, NI_STATE] == EXPANDED:
        start = nodes_i[g, node, NI_EDGE_START]
        best = -1
        most = 0
        for k in range(nodes_i[g, node, NI_NUM_EDGES]):
            if edges_i[g, start + k, EI_VISITS] > most:
                most = edges_i[g, start + k, EI_VISITS]
                best = k
        if best < 0:
            break
        out[length] = edges_i[g, start + best, EI_MOVE]
        length += 1
        node = edges_i[g, start + best, EI_CHILD]
        if node < 0:
            break
    return length


# ----------------------------------------------------------------------------------------------
# Python driver

_MOVE_TABLE: list[chess.Move] = []


def _move_table() -> list[chess.Move]:
    """``chess.Move`` for every kernel move int (``from | to << 6 | promotion << 12``), built once."""
    if not _MOVE_TABLE:
        for code in range(5 << 12):
            promotion = code >> 12
            _MOVE_TABLE.append(chess.Move(code & 63, (code >> 6) & 63, promotion + 1 if promotion else None))
    return _MOVE_TABLE


class Forest:
    """The arrays of every game slot (layout in the module docstring), grown by doubling."""

    def __init__(self, slots: int = 1, nodes: int = 64, edges: int = 2048) -> None:
        self.num_slots, self.num_nodes, self.num_edges = slots, nodes, edges
        self.nodes_i = np.zeros((slots, nodes, NODE_I), np.int32)
        self.nodes_f = np.zeros((slots, nodes, NODE_F), np.float64)
        self.edges_i = np.zeros((slots, edges, EDGE_I), np.int32)
        self.edges_f = np.zeros((slots, edges, EDGE_F), np.float64)
        self.trees = np.zeros((slots, TREE_SIZE), np.int64)
        self.bb = np.zeros((slots, 14), np.uint64)
        self.sq = np.full((slots, 64), K.EMPTY, np.int8)
        self.st = np.zeros((slots, K.ST_SIZE), np.int64)
        self.keys = np.zeros((slots, HISTORY), np.uint64)
        self.undo = np.zeros((slots, HISTORY, K.U_SIZE), np.int32)
        self.free = list(range(slots - 1, -1, -1))
        self._scratch()

    def _scratch(self) -> None:
        self.scratch_nodes_i = np.zeros((self.num_nodes, NODE_I), np.int32)
        self.scratch_nodes_f = np.zeros((self.num_nodes, NODE_F), np.float64)
        self.scratch_edges_i = np.zeros((self.num_edges, EDGE_I), np.int32)
        self.scratch_edges_f = np.zeros((self.num_edges, EDGE_F), np.float64)
        self.queue = np.zeros(self.num_nodes, np.int64)

    def _grow(self, slots: int, nodes: int, edges: int) -> None:
        def grown(array: np.ndarray, shape: tuple, fill: Any = 0) -> np.ndarray:
            out = np.full(shape, fill, array.dtype)
            out[tuple(slice(0, n) for n in array.shape)] = array
            return out

        old_slots = self.num_slots
        self.nodes_i = grown(self.nodes_i, (slots, nodes, NODE_I))
        self.nodes_f = grown(self.nodes_f, (slots, nodes, NODE_F))
        self.edges_i = grown(self.edges_i, (slots, edges, EDGE_I))
        self.edges_f = grown(self.edges_f, (slots, edges, EDGE_F))
        if slots != old_slots:
            self.trees = grown(self.trees, (slots, TREE_SIZE))
            self.bb = grown(self.bb, (slots, 14))
            self.sq = grown(self.sq, (slots, 64), K.EMPTY)
            self.st = grown(self.st, (slots, K.ST_SIZE))
            self.keys = grown(self.keys, (slots, HISTORY))
            self.undo = grown(self.undo, (slots, HISTORY, K.U_SIZE))
            self.free = list(range(slots - 1, old_slots - 1, -1)) + self.free
        resized = nodes != self.num_nodes or edges != self.num_edges
        self.num_slots, self.num_nodes, self.num_edges = slots, nodes, edges
        if resized:
            self._scratch()

    def reserve(self, nodes: int, edges: int) -> None:
        """At least ``nodes`` nodes and ``edges`` edges per slot."""
        if nodes > self.num_nodes or edges > self.num_edges:
            new_nodes, new_edges = self.num_nodes, self.num_edges
            while new_nodes < nodes:
                new_nodes *= 2
            while new_edges < edges:
                new_edges *= 2
            self._grow(self.num_slots, new_nodes, new_edges)

    def acquire(self) -> int:
        if not self.free:
            self._grow(self.num_slots * 2, self.num_nodes, self.num_edges)
        return self.free.pop()

    def release(self, slot: int) -> None:
        self.free.append(slot)

    def load(self, slot: int, board: chess.Board) -> None:
        """Set slot ``slot`` to ``board`` with an empty tree: its recent moves (since the last capture or
        pawn move) replayed so that repetitions are seen, as ``Position.from_board`` does."""
        reason = why_unsupported(board)
        if reason:  # the kernel cannot hold it: say why
            raise ValueError(f"position {board.fen()!r}: {reason}")
        start, replayed = replayed_start(board)
        moves = np.array([move_from_chess(move) for move in replayed], dtype=np.int32)
        pieces = np.array([start.pieces_mask(kind, colour) for colour in (chess.WHITE, chess.BLACK)
                           for kind in range(1, 7)], dtype=np.uint64)
        castling = castling_bits(start)
        ep = NO_SQUARE if start.ep_square is None else start.ep_square
        load_slot(slot, pieces, K.WHITE if start.turn == chess.WHITE else K.BLACK, castling, ep,
                  start.halfmove_clock, start.fullmove_number, moves, board.halfmove_clock, self.bb, self.sq,
                  self.st, self.keys, self.undo, self.trees, self.nodes_i, self.nodes_f)


class CompiledGameTree:
    """One game being searched by a ``CompiledMCTS`` (``GameTree``'s interface).

    ``board`` is the game (a ``chess.Board`` with its move stack); the tree and the compiled board
    live in a slot of the search's ``Forest``, taken at the first search and given back when this
    object is collected. Each tree draws its noise and samples its moves from its own ``rng``.
    """

    def __init__(self, board: chess.Board | None = None, seed: int | np.random.Generator | None = None) -> None:
        self.board = board.copy() if board is not None else chess.Board()
        self.rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        self._forest: Forest | None = None
        self._slot = -1
        self._synced: tuple[int, chess.Move | None] = (-1, None)  # the board the slot holds

    def _stamp(self) -> tuple[int, chess.Move | None]:
        stack = self.board.move_stack
        return len(stack), (stack[-1] if stack else None)

    def _attach(self, forest: Forest) -> int:
        """The slot holding this game, (re)loaded when the board moved on outside ``advance``."""
        if self._forest is None:
            self._forest = forest
            self._slot = forest.acquire()
            weakref.finalize(self, forest.release, self._slot)
        elif self._forest is not forest:
            raise ValueError("a CompiledGameTree is searched by one CompiledMCTS only")
        if self._synced != self._stamp():
            forest.load(self._slot, self.board)
            self._synced = self._stamp()
        return self._slot

    def advance(self, move: chess.Move, reuse: bool = True) -> None:
        """Play ``move`` and keep its subtree as the new root when ``reuse`` (noise is redrawn later)."""
        forest = self._forest
        in_sync = forest is not None and self._synced == self._stamp()
        self.board.push(move)
        if forest is None or not in_sync:
            return
        slot = self._slot
        if forest.st[slot, ST_PLY] >= HISTORY - SEARCH_RESERVE - 1:  # the kernel's history is full: reload
            return
        advance_tree(slot, move_from_chess(move), reuse, forest.nodes_i, forest.nodes_f, forest.edges_i,
                     forest.edges_f, forest.trees, forest.bb, forest.sq, forest.st, forest.keys, forest.undo,
                     forest.scratch_nodes_i, forest.scratch_nodes_f, forest.scratch_edges_i, forest.scratch_edges_f,
                     forest.queue)
        self._synced = self._stamp()

    @property
    def root_priors(self) -> np.ndarray | None:
        """``float32 [K]``: the priors the root's selection uses (with this search's noise), None before a search."""
        forest = self._forest
        if forest is None or self._synced != self._stamp() or forest.nodes_i[self._slot, 0, NI_STATE] != EXPANDED:
            return None
        start = forest.nodes_i[self._slot, 0, NI_EDGE_START]
        count = forest.nodes_i[self._slot, 0, NI_NUM_EDGES]
        return forest.edges_f[self._slot, start:start + count, EF_SEL_PRIOR].astype(np.float32)

    def principal_variation(self, max_length: int = 20) -> list[chess.Move]:
        """The most visited line from the root (``mcts.principal_variation``); empty before a search."""
        if self._forest is None or self._synced != self._stamp():
            return []
        out = np.zeros(max_length, np.int32)
        f = self._forest
        length = principal_line(self._slot, f.nodes_i, f.edges_i, out)
        table = _move_table()
        return [table[m] for m in out[:length].tolist()]


class CompiledMCTS:
    """Batched PUCT search in compiled code: ``search(trees)`` as ``MCTS.search`` (PUCT only).

    ``evaluator`` is a ``PlaneEvaluator`` (``NetworkEvaluator``, ``UniformPlaneEvaluator``); trees
    are ``CompiledGameTree``s (``new_tree`` makes one).
    """

    def __init__(self, evaluator: PlaneEvaluator, config: SearchConfig = SearchConfig()) -> None:
        if config.algorithm != "puct":
            raise ValueError(f"the compiled search implements search.algorithm puct only, not {config.algorithm!r}")
        if not hasattr(evaluator, "forward"):
            raise TypeError("the compiled search needs an evaluator with forward(planes) -> (logits, values)")
        self.evaluator = evaluator
        self.config = config
        self.forest = Forest()
        self.params = np.zeros(NUM_PARAMS, np.float64)
        self.params[P_C_PUCT] = config.c_puct
        self.params[P_C_BASE] = config.c_puct_base
        self.params[P_FPU] = config.fpu_reduction
        self.params[P_VIRTUAL_LOSS] = config.virtual_loss
        self.params[P_TWOFOLD] = 1.0 if config.twofold_draw else 0.0
        self.params[P_LEAVES_PER_GAME] = config.leaves_per_game
        self.params[P_MATE_IN_ONE] = 1.0 if config.mate_in_one else 0.0
        self._planes = np.zeros((0, 24, 8, 8), np.uint8)
        self._rows = plane_rows(self._planes)
        self._request_slots = np.zeros(0, np.int64)
        self._request_nodes = np.zeros(0, np.int64)
        self._moves = np.zeros(MAX_MOVES, np.int32)
        self._softmax = np.zeros(MAX_MOVES, np.float64)
        self._alphas: dict[int, np.ndarray] = {}  # Dirichlet parameters by number of moves

    @staticmethod
    def new_tree(board: chess.Board | None = None, seed: int | np.random.Generator | None = None) -> CompiledGameTree:
        return CompiledGameTree(board, seed)

    def _buffers(self, requests: int) -> None:
        if len(self._planes) < requests:
            self._planes = np.zeros((requests, 24, 8, 8), np.uint8)
            self._rows = plane_rows(self._planes)  # the same memory, a rank at a time
            self._request_slots = np.zeros(requests, np.int64)
            self._request_nodes = np.zeros(requests, np.int64)

    def _evaluate(self, count: int) -> None:
        """The network on the round's ``count`` leaves (in chunks of the evaluator's ``max_batch``), then
        their expansion and backup."""
        step = getattr(self.evaluator, "max_batch", None) or count
        if count <= step:
            logits, values = self.evaluator.forward(self._planes[:count])
        else:
            parts = [self.evaluator.forward(self._planes[start:min(start + step, count)])
                     for start in range(0, count, step)]
            logits = np.concatenate([part[0] for part in parts])
            values = np.concatenate([np.asarray(part[1]).reshape(-1) for part in parts])
        logits = np.ascontiguousarray(logits, dtype=np.float32)
        values = np.ascontiguousarray(values, dtype=np.float32).reshape(count)
        f = self.forest
        expand_leaves(count, self._request_slots, self._request_nodes, logits, values, self.params, f.nodes_i,
                      f.nodes_f, f.edges_i, f.edges_f, self._softmax)

    def search(
        self,
        trees: Sequence[CompiledGameTree],
        add_noise: bool | Sequence[bool] = False,
        temperature: float | Sequence[float] = 0.0,
        num_simulations: int | Sequence[int] | None = None,
    ) -> list[SearchResult]:
        """Run ``num_simulations`` (one budget, or one per tree) new simulations in every tree.

        As ``MCTS.search`` (PUCT): one network call per round for the leaves of every game,
        ``add_noise`` mixes Dirichlet noise into each root's priors, ``temperature`` picks the move
        from the visit counts; one value, or one per tree, for each.
        """
        config = self.config
        count = len(trees)
        budget = config.num_simulations if num_simulations is None else num_simulations
        budgets = [int(b) for b in np.broadcast_to(np.asarray(budget), (count,))]
        temperatures = [float(t) for t in np.broadcast_to(np.asarray(temperature, dtype=np.float64), (count,))]
        noises = [bool(n) for n in np.broadcast_to(np.asarray(add_noise, dtype=bool), (count,))]
        if not len(temperatures) == len(budgets) == len(noises) == count:
            raise ValueError("one temperature, one budget and one noise flag per tree are needed")
        if count == 0:
            return []
        forest = self.forest
        slots = np.array([tree._attach(forest) for tree in trees], dtype=np.int64)
        if len(set(slots.tolist())) != count:
            raise ValueError("a tree appears twice in one search")
        try:
            return self._search(trees, slots, budgets, temperatures, noises)
        except BaseException:
            # A search cut short leaves leaves waiting for the network: these trees start afresh next time.
            for tree in trees:
                tree._synced = (-1, None)
            raise

    def _search(self, trees, slots, budgets, temperatures, noises) -> list[SearchResult]:
        config = self.config
        count = len(trees)
        f = self.forest
        # Each simulation adds at most one node; each leaf at most MAX_MOVES edges.
        nodes_needed = int(f.trees[slots, T_NUM_NODES].max()) + max(budgets) + 2
        f.reserve(nodes_needed, int(f.trees[slots, T_NUM_EDGES].max()) + MAX_MOVES)
        self._buffers(count * config.leaves_per_game)
        requests, finished = collect_roots(slots, f.nodes_i, f.nodes_f, f.edges_i, f.edges_f, f.trees, f.bb, f.sq, f.st,
                                           f.keys, f.undo, self._rows, self._request_slots, self._request_nodes,
                                           self._moves, self.config.mate_in_one)
        if finished >= 0:
            raise ValueError(f"cannot search a finished game: {trees[finished].board.fen()}")
        if requests:
            self._evaluate(requests)
        sizes = np.zeros(count, np.int64)
        root_sizes(slots, f.nodes_i, sizes)
        offsets = np.zeros(count + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        draws, draw_offsets = self._root_noise(trees, slots, sizes, noises)
        set_root_priors(slots, draws, draw_offsets, config.dirichlet_epsilon, f.nodes_i, f.edges_i, f.edges_f)
        # A root with one legal move needs no search: pi is certain whatever the simulations say.
        remaining = np.array([b if s > 1 else 0 for b, s in zip(budgets, sizes.tolist())], dtype=np.int64)
        left = bool((remaining > 0).any())
        leaves_per_round = config.leaves_per_game * MAX_MOVES
        most_edges = int(f.trees[slots, T_NUM_EDGES].max())
        while left:
            if most_edges + leaves_per_round > f.num_edges:
                f.reserve(f.num_nodes, most_edges + leaves_per_round)
            requests, left, most_edges = collect_leaves(
                slots, remaining, self.params, f.nodes_i, f.nodes_f, f.edges_i, f.edges_f, f.trees, f.bb, f.sq,
                f.st, f.keys, f.undo, self._rows, self._request_slots, self._request_nodes, self._moves)
            if requests:
                self._evaluate(requests)
            elif left:  # every game collided with a leaf no network call will answer
                raise RuntimeError("the search stalled on leaves waiting for the network")
        if (remaining < 0).any():
            raise RuntimeError(f"search deeper than {MAX_DEPTH} plies below the root")
        return self._results(trees, slots, sizes, offsets, temperatures)

    def _root_noise(self, trees, slots, sizes, noises) -> tuple[np.ndarray, np.ndarray]:
        """Dirichlet draws ``float64 [sum K]`` for the roots that get noise, from each tree's generator
        as ``MCTS.search`` draws them, and their ``offsets`` ``[G + 1]`` (an empty range: no noise)."""
        config = self.config
        offsets = np.zeros(len(trees) + 1, np.int64)
        if config.dirichlet_epsilon <= 0 or not any(noises):
            return np.zeros(0, np.float64), offsets
        alphas = self._alphas
        parts = []
        total = 0
        for j, (tree, noise, size) in enumerate(zip(trees, noises, sizes.tolist())):
            if noise and size > 1:
                alpha = alphas.get(size)
                if alpha is None:
                    alpha = alphas[size] = np.full(size, config.dirichlet_alpha)
                parts.append(tree.rng.dirichlet(alpha))
                total += size
            offsets[j + 1] = total
        return (np.concatenate(parts) if parts else np.zeros(0, np.float64)), offsets

    def _results(self, trees, slots, sizes, offsets, temperatures) -> list[SearchResult]:
        f = self.forest
        count = len(trees)
        total = int(offsets[-1])
        moves = np.zeros(total, np.int32)
        visits = np.zeros(total, np.int64)
        pi = np.zeros(total, np.float32)
        priors = np.zeros(total, np.float32)
        root_values = np.zeros(count, np.float64)
        most = np.zeros(count, np.int64)
        root_statistics(slots, f.nodes_i, f.nodes_f, f.edges_i, f.edges_f, offsets, moves, visits, pi, priors,
                        root_values, most)
        # The move: drawn from each tree's generator in the order and number MCTS draws.
        uniforms = np.zeros(count, np.float64)
        chosen = np.zeros(count, np.int64)
        for j, (tree, temperature, top) in enumerate(zip(trees, temperatures, most.tolist())):
            if temperature > 0:
                if top > 0:
                    uniforms[j] = tree.rng.random()
                else:
                    chosen[j] = int(tree.rng.integers(int(sizes[j])))
        choose_moves(visits, offsets, np.asarray(temperatures, np.float64), uniforms, chosen)
        table = _move_table()
        results = []
        bounds = offsets.tolist()
        for j, (index, value) in enumerate(zip(chosen.tolist(), root_values.tolist())):
            a, b = bounds[j], bounds[j + 1]
            counts = visits[a:b]
            root_moves = [table[m] for m in moves[a:b].tolist()]
            results.append(SearchResult(move=root_moves[index], moves=root_moves, visit_counts=counts, pi=pi[a:b],
                                        root_value=value, priors=priors[a:b], target_counts=counts))
        return results


def build_search(evaluator: Any, config: SearchConfig, implementation: str | None = None) -> tuple[Any, Any]:
    """``(search, new_tree)`` for ``implementation`` ``compiled``, ``python`` or ``auto`` (compiled for PUCT
    with an evaluator that has ``forward``, else the Python ``MCTS``); ``new_tree(board, seed)`` makes the
    tree that search takes (``CompiledGameTree`` or ``GameTree``). The one change a caller needs to switch.
    ``implementation`` defaults to ``config.implementation``."""
    implementation = config.implementation if implementation is None else implementation
    if implementation not in ("auto", "compiled", "python"):
        raise ValueError(f"search implementation must be auto, compiled or python, got {implementation!r}")
    compiled = implementation == "compiled" or (implementation == "auto" and config.algorithm == "puct"
                                                and hasattr(evaluator, "forward"))
    if compiled:
        return CompiledMCTS(evaluator, config), CompiledGameTree
    from alphazero.search.mcts import MCTS, GameTree

    return MCTS(evaluator, config), GameTree
