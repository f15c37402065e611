"""Search: alpha-beta on the compiled board (``alphabeta``), its evaluations (``evals``), the
``ab:`` player (``ab_player``) and its benchmarks (``ab_bench``).

Knows nothing of torch. Importing the package compiles nothing.
"""
