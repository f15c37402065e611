"""The compiled board: ``kernel`` (numba rules on arrays), ``position`` (python-chess at the edge).

Imports nothing else of the project and nothing of torch. Importing the package compiles nothing:
each compiled function is compiled, or loaded from its cache, on its first call.
"""

from alphazero.board.position import Position, move_from_chess, move_to_chess

__all__ = ["Position", "move_from_chess", "move_to_chess"]
