"""PNG plots (matplotlib, Agg backend: no display needed): a run's arena history, Elo by generation.

Every plot is written atomically (``alphazero.fileio.atomic_write``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from alphazero.checkpoint import RunState
from alphazero.fileio import atomic_write
from alphazero.judge.elo import Rating


def _save_png(fig, path: Path) -> Path:
    """Write ``fig`` to ``path`` as a PNG, atomically, and free it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    try:
        atomic_write(path, lambda handle: fig.savefig(handle, dpi=100, format="png"))
    finally:
        plt.close(fig)
    return path


def plot_arena_history(state: RunState, path: str | os.PathLike) -> Path:
    """Two panels: each arena's Elo of candidate vs best with its 95% interval (promotions marked),
    and the Elo of the best network by generation, chained through the promotions' arena results."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    arenas = state.arenas
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    generations = [a.generation for a in arenas]
    elos = [a.elo for a in arenas]
    low = [a.elo - a.elo_low for a in arenas]
    high = [a.elo_high - a.elo for a in arenas]
    colours = ["tab:green" if a.promoted else "tab:gray" for a in arenas]
    top.axhline(0, color="black", linewidth=0.8)
    for g, e, lo, hi, c in zip(generations, elos, low, high, colours):
        top.errorbar([g], [e], yerr=[[lo], [hi]], fmt="o", color=c, capsize=3)
    top.set_ylabel("candidate - best (Elo, 95% CI)")
    top.set_title("Arena results (green: promoted)")
    best_elo, chain = 0.0, [(0, 0.0)]
    for arena in arenas:
        if arena.promoted:
            best_elo += arena.elo
        chain.append((arena.generation, best_elo))
    bottom.step([g for g, _ in chain], [e for _, e in chain], where="post", color="tab:blue")
    bottom.set_xlabel("generation")
    bottom.set_ylabel("best network (Elo vs gen 0, chained)")
    return _save_png(fig, path)


def plot_ratings(ratings: dict[str, Rating], generation_numbers: dict[str, int], anchors: Sequence[str],
                 path: str | os.PathLike, scale: str) -> Path:
    """PNG of Elo by generation with 95% error bars; anchors as labelled horizontal dashed lines; ``scale`` says
    what fixes the Elo scale (``gen-0000 = 0``, or the pinned players and their ratings)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    path = Path(path)
    rated = sorted((generation_numbers[name], ratings[name]) for name in ratings if name in generation_numbers)
    fig, axes = plt.subplots(figsize=(8, 4.5))
    if rated:
        xs = [number for number, _ in rated]
        ys = [rating.elo for _, rating in rated]
        errors = [[rating.elo - rating.elo_low for _, rating in rated], [rating.elo_high - rating.elo for _, rating in rated]]
        axes.errorbar(xs, ys, yerr=errors, fmt="o-", color="tab:blue", capsize=3, label="generation (95% CI)")
    colours = ["tab:red", "tab:green", "tab:purple", "tab:orange", "tab:brown"]
    for number, name in enumerate(anchors):
        if name in ratings:
            axes.axhline(ratings[name].elo, linestyle="--", color=colours[number % len(colours)], label=name)
    axes.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    axes.set_xlabel("generation")
    axes.set_ylabel(f"Elo ({scale})")
    axes.set_title("Elo by generation (maximum likelihood over all games)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    return _save_png(fig, path)
