"""Search: batched PUCT and Gumbel MCTS (``mcts``) and self-play over it (``selfplay``); alpha-beta on
the compiled board (``alphabeta``), its evaluations (``evals``), the ``ab:`` player (``ab_player``) and
its benchmarks (``ab_bench``).

Sees networks only through an evaluator (``alphazero.nets.evaluator``); knows nothing of torch.
Importing the package imports nothing.
"""
