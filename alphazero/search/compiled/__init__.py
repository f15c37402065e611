"""PUCT and Gumbel Monte Carlo tree search in compiled code: array trees for many games, one network call per round.

The room, laid out as mctx lays out its search, ground up (each module imports only those before it):

- ``sums``: numpy's pairwise summation, bit for bit (the priors and move draws must equal numpy's);
- ``tree``: the array layout (stated once, in its docstring), trees without search rules (new node,
  backup, tree reuse, loading a position), ``Forest`` (the arrays of every game slot) and
  ``CompiledGameTree`` (one game);
- ``expansion``: a node reached for the first time (terminal rules, legal moves as edges, its planes
  encoded) and the network's answer turned into priors and backed up;
- ``gumbel``: Gumbel AlphaZero's rules (completed Q, the root's sequential halving, the deterministic
  choice below it, the improved policy and the best survivor) and the arrays of its roots;
- ``selection``: PUCT or Gumbel descent with virtual loss, one round over every game;
- ``root``: the roots' noise, statistics and chosen moves;
- ``batch``: ``CompiledMCTS``, the Python driver with ``MCTS.search``'s interface, and the plane
  evaluator seam to the network.

``alphazero.search.factory.build_search`` chooses between this search and the Python one. The room
knows the position only as ``alphazero.board.kernel``'s arrays and the network only through a plane
evaluator; it knows nothing of torch or Ray. Importing the package imports nothing.

The algorithm is ``alphazero.search.mcts``'s PUCT or Gumbel, operation for operation (its docstring
has the formulas): the same PUCT selection (tried moves in the order first tried, then the best
untried one at first-play urgency, ties to the earlier), the same virtual loss, the same terminal
rules (checkmate, stalemate, insufficient material, fifty moves, threefold repetition over the game,
a position repeating one earlier in the tree as a draw, and a position whose mover can mate in one as
a win), the same root Dirichlet noise and move sampling drawn from the tree's generator, the same
tree reuse; for Gumbel (whose statistics start afresh at every search, while with ``reuse_tree`` the
network evaluations of the kept subtree are reused: ``tree``'s "Kept evaluations") the same Gumbel
draws, halving schedule, completed Q, deterministic selection below the root and improved policy (numpy's ``exp`` and ``log`` where ``mcts`` takes numpy's: see
``gumbel``). Moves are kept in ``alphazero.board.movegen``'s order (``alphazero.board.move_order``)
and priors are softmaxed as ``masked_softmax`` does, sums in numpy's pairwise order, so with the same
evaluator and seed both searches return the same visit counts, the same moves and the same policy
targets (the tests check it, and self-play records come out byte for byte the same). Differences:
the kernel's threefold check tells an en-passant right that only a pin makes illegal apart where
python-chess does not (see ``kernel``); a search may go at most ``selection.MAX_DEPTH`` plies below
its root.

Compilation is cached (``@njit(cache=True)`` everywhere): the first process compiles for ~20-30 s,
later ones load the machine code in ~1 s. Numba checks a cache entry against its own source file
only: after editing ``alphazero/board/kernel.py``, ``bits.py``, ``move_order.py`` or
``encode_kernel.py``, delete ``alphazero/search/compiled/__pycache__/`` too, or this room keeps the
old board compiled in.
"""
