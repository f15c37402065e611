"""The board: the 24-plane encoding and 4672 actions (``encoding``), python-chess glue for rules and
results (``game``), a fast legal move generator for the Python search (``movegen``), and the compiled
board (``kernel``: numba rules on arrays; ``position``: python-chess at its edge; ``bits``; the planes
and actions computed from its arrays, ``encode_kernel``; its moves in movegen's order, ``move_order``;
FENs parsed onto its arrays in compiled code, ``fen``).

Imports nothing else of the project and nothing of torch. Importing the package imports nothing:
``from alphazero.board.position import Position`` loads numba; each compiled function is compiled,
or loaded from its cache, on its first call.
"""
