"""Which search a game gets: the compiled search (PUCT or Gumbel) or the Python one, from the config.

Owns ``build_search``, the one place self-play, the players and the benchmarks choose between
``alphazero.search.compiled`` (``CompiledMCTS`` over ``CompiledGameTree``s) and ``alphazero.search.mcts``
(``MCTS`` over ``GameTree``s) by ``search.implementation``. Knows nothing of how either searches.
"""

from __future__ import annotations

from typing import Any

from alphazero.config import SearchConfig
from alphazero.search.compiled.batch import CompiledMCTS
from alphazero.search.compiled.tree import CompiledGameTree
from alphazero.search.mcts import MCTS, GameTree


def build_search(evaluator: Any, config: SearchConfig, implementation: str | None = None) -> tuple[Any, Any]:
    """``(search, new_tree)`` for ``implementation`` ``compiled``, ``python`` or ``auto`` (compiled, PUCT or
    Gumbel, with an evaluator that has ``forward``, else the Python ``MCTS``); ``new_tree(board, seed)`` makes the
    tree that search takes (``CompiledGameTree`` or ``GameTree``). The one change a caller needs to switch.
    ``implementation`` defaults to ``config.implementation``."""
    implementation = config.implementation if implementation is None else implementation
    if implementation not in ("auto", "compiled", "python"):
        raise ValueError(f"search implementation must be auto, compiled or python, got {implementation!r}")
    compiled = implementation == "compiled" or (implementation == "auto" and hasattr(evaluator, "forward"))
    if compiled:
        return CompiledMCTS(evaluator, config), CompiledGameTree
    return MCTS(evaluator, config), GameTree
