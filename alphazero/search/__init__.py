"""Search: batched PUCT and Gumbel MCTS (``mcts``), the same PUCT compiled on the board kernel
(``compiled_mcts``, benchmarked by ``compiled_bench``) and self-play over them (``selfplay``);
alpha-beta on the compiled board (``alphabeta``), its evaluations (``evals``), the ``ab:`` player
(``ab_player``) and its benchmarks (``ab_bench``).

Sees networks only through an evaluator (``alphazero.nets.evaluator``); knows nothing of torch.
Importing the package imports nothing.
"""
