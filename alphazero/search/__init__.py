"""Search: batched PUCT and Gumbel MCTS (``mcts``), the same PUCT compiled on the board kernel
(the ``compiled`` room), the choice between them (``factory``) and self-play over them
(``selfplay``), whose games it records (``records``);
alpha-beta on the compiled board (``alphabeta``), its evaluations (``evals``) and the ``ab:`` player
(``ab_player``). Their benchmarks are in ``alphazero.bench``.

Sees networks only through an evaluator (``alphazero.nets.evaluator``); knows nothing of torch.
Importing the package imports nothing.
"""
