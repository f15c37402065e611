"""Serving a player: to a chess GUI over UCI, and to a person in the terminal.

The UCI engine is three layers: the command loop with its one search thread (``uci``), the searchers
it serves (``searchers``: a network with the tree search, alpha-beta, any other player spec), and the
pure protocol (``uci_protocol``: lines to commands, option tables, replies; ``uci_limits``: ``go``
limits and stop rules). ``play`` is the terminal game against a network. Players come from
``alphazero.judge.players``; this room judges nothing (no matches, no Elo), learns nothing
(``alphazero.learn`` is its peer: neither imports the other), and knows nothing of Ray or the command line.
"""
