"""Selection in the compiled search: PUCT or Gumbel descent to a leaf in every game, one round at a time.

Owns the selection rule of ``alphazero.search.mcts`` (its docstring has the formula), operation for
operation: ``U = c * P * sqrt(N) / (1 + n)`` with ``c = c_puct + log((N + c_base + 1) / c_base)``,
scored over the tried moves in the order first tried, then the best untried one at first-play
urgency (``Q(parent) - fpu_reduction``; ties to the earlier), or with ``P_GUMBEL`` Gumbel's choices
(``gumbel``: sequential halving at the root, the deterministic rule below it), a root that can mate
searching its mate only, virtual loss on the way down and undone on a collision (``select_leaf``); and
a round over every game with budget left (``collect_leaves``), whose terminal and kept leaves back up at once
and whose other leaves wait for the network. Reads the tree layout of ``tree``, the settings in
``params`` and, for Gumbel, the roots' arrays of ``gumbel``; knows nothing of networks, torch or Ray.

A selection descends the slot's kernel position with make/unmake and leaves it at the root; it goes
at most ``MAX_DEPTH`` plies below the root (the kernel keeps ``SEARCH_RESERVE`` moves free).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from alphazero.board.kernel import make_move, unmake_move
from alphazero.board.position import SEARCH_RESERVE
from alphazero.search.compiled.expansion import reach
from alphazero.search.compiled.gumbel import interior_index, root_index
from alphazero.search.compiled.tree import (
    EF_SEL_PRIOR,
    EF_VALUE,
    EI_CHILD,
    EI_KEPT,
    EI_MOVE,
    EI_ORDER,
    EI_TRIED,
    EI_VISITS,
    EXPANDED,
    NF_TERMINAL,
    NF_VALUE_SUM,
    NI_CURSOR,
    NI_EDGE_START,
    NI_NUM_EDGES,
    NI_NUM_TRIED,
    NI_PARENT,
    NI_PARENT_EDGE,
    NI_STATE,
    NI_VISITS,
    NI_WIN,
    P_C_BASE,
    P_C_PUCT,
    P_C_SCALE,
    P_C_VISIT,
    P_FPU,
    P_GUMBEL,
    P_LEAVES_PER_GAME,
    P_MATE_IN_ONE,
    P_TWOFOLD,
    P_VIRTUAL_LOSS,
    PENDING,
    T_NUM_EDGES,
    TERMINAL,
    backup,
    new_node,
)

# What one selection found (SELECT_KEPT: a kept node's first visit, its network value known).
SELECT_COLLISION, SELECT_TERMINAL, SELECT_REQUEST, SELECT_TOO_DEEP, SELECT_KEPT = 0, 1, 2, 3, 4
MAX_DEPTH = SEARCH_RESERVE - 16  # plies below the root; the kernel keeps SEARCH_RESERVE free


@njit(cache=True, inline="always")
def _try(nodes_i, nodes_f, edges_i, trees, g, node, start, i):
    """Give the node's move ``i`` (local) a child, the node kept for it if any (``tree``'s "Kept
    evaluations"), and append it to the tried list."""
    tried = nodes_i[g, node, NI_NUM_TRIED]
    edges_i[g, start + tried, EI_TRIED] = i
    nodes_i[g, node, NI_NUM_TRIED] = tried + 1
    kept = edges_i[g, start + i, EI_KEPT]
    if kept >= 0:
        edges_i[g, start + i, EI_KEPT] = -1
        edges_i[g, start + i, EI_CHILD] = kept
    else:
        edges_i[g, start + i, EI_CHILD] = new_node(nodes_i, nodes_f, trees, g, node, start + i)


@njit(cache=True)
def select_leaf(params, nodes_i, nodes_f, edges_i, edges_f, trees, bb, sq, st, keys, undo, g, moves, planes,
                row, root_scores, scores_first, schedule, schedule_first, schedule_length, scratch):
    """Descend from the root of slot ``g`` to a leaf, adding virtual visits (``MCTS._select``).

    Gumbel's root reads its scores from ``root_scores[scores_first:]`` and its halving schedule from
    ``schedule[schedule_first:schedule_first + schedule_length]`` (``gumbel``'s arrays; unread by PUCT).
    Returns ``(what, leaf)``: ``SELECT_REQUEST`` (the leaf's planes are in ``planes[row]``, the
    ``rows`` view of the round's planes),
    ``SELECT_TERMINAL``, ``SELECT_KEPT`` (a kept node, ``tree``'s "Kept evaluations"), ``SELECT_COLLISION`` (the leaf already waits; virtual visits undone) or
    ``SELECT_TOO_DEEP``. The slot's board is back at the root on return.
    """
    c_puct = params[P_C_PUCT]
    c_base = params[P_C_BASE]
    fpu_reduction = params[P_FPU]
    virtual_loss = params[P_VIRTUAL_LOSS]
    twofold = params[P_TWOFOLD] != 0.0
    mate_in_one = params[P_MATE_IN_ONE] != 0.0
    gumbel = params[P_GUMBEL] != 0.0
    c_visit = params[P_C_VISIT]
    c_scale = params[P_C_SCALE]
    board_bb, board_sq, board_st, board_keys, board_undo = bb[g], sq[g], st[g], keys[g], undo[g]
    node = 0
    depth = 0
    what = SELECT_REQUEST
    while True:
        state = nodes_i[g, node, NI_STATE]
        if state == TERMINAL:
            what = SELECT_TERMINAL
            break
        if state == EXPANDED and node != 0 and nodes_i[g, node, NI_VISITS] == 0:
            what = SELECT_KEPT  # only a kept node is expanded without a visit
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
            if reach(nodes_i, nodes_f, edges_i, edges_f, trees, g, node, depth, twofold, mate_in_one, board_bb,
                     board_sq, board_st, board_keys, board_undo, moves, planes[row]):
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
        elif gumbel:
            if node == 0:
                best = root_index(nodes_f, edges_i, edges_f, g, start, count, c_visit, c_scale, root_scores, scores_first,
                                  schedule, schedule_first, schedule_length, scratch)
            else:
                best = interior_index(nodes_i, nodes_f, edges_i, edges_f, g, node, start, count, c_visit, c_scale,
                                      scratch)
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
                   undo, planes, request_slots, request_nodes, request_rows, moves, root_scores, offsets, schedule,
                   schedule_offsets, scratch):
    """One round of selection in every game with budget left (``MCTS.search``'s inner loop).

    ``root_scores``, ``offsets``, ``schedule``, ``schedule_offsets``, ``scratch``: Gumbel's root arrays
    (``gumbel``'s layout; empty arrays and zero offsets for PUCT).

    Each game collects up to ``leaves_per_game`` leaves; terminal leaves back up at once (and do not count
    towards it); a collision ends the game's round. A leaf for the network has its planes in row
    ``request_rows[r]`` of ``planes``; a kept leaf (``tree``'s "Kept evaluations") has row -1, waits as
    a network leaf would and backs up in ``expand_leaves``, in its turn, so the search is the same
    simulation for simulation. Returns ``(requests, rows, left, most_edges)``: the leaves in ``request_*``,
    the rows of ``planes`` for the network, whether any game has budget left, and the largest edge count
    in use (the driver grows the arrays from it).
    ``remaining`` (int64 [G]) is decremented in place; -1 in it afterwards marks a search too deep.
    """
    leaves_per_game = int(params[P_LEAVES_PER_GAME])
    virtual_loss = params[P_VIRTUAL_LOSS]
    requests = 0
    rows = 0
    for j in range(len(slots)):
        g = slots[j]
        collected = 0
        while remaining[j] > 0 and collected < leaves_per_game:
            what, leaf = select_leaf(params, nodes_i, nodes_f, edges_i, edges_f, trees, bb, sq, st, keys, undo, g,
                                     moves, planes, rows, root_scores, offsets[j], schedule, schedule_offsets[j],
                                     schedule_offsets[j + 1] - schedule_offsets[j], scratch)
            if what == SELECT_COLLISION:
                break
            if what == SELECT_TOO_DEEP:
                remaining[j] = -1
                break
            remaining[j] -= 1
            if what == SELECT_TERMINAL:
                backup(nodes_i, nodes_f, edges_f, g, leaf, nodes_f[g, leaf, NF_TERMINAL], virtual_loss)
            else:  # a leaf for the network, or a kept one answered with the network's call (as it would be)
                request_slots[requests] = g
                request_nodes[requests] = leaf
                if what == SELECT_KEPT:
                    nodes_i[g, leaf, NI_STATE] = PENDING
                    request_rows[requests] = -1
                else:
                    request_rows[requests] = rows
                    rows += 1
                requests += 1
                collected += 1
    left = False
    most_edges = 0
    for j in range(len(slots)):
        if remaining[j] > 0:
            left = True
        most_edges = max(most_edges, trees[slots[j], T_NUM_EDGES])
    return requests, rows, left, most_edges
