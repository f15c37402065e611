"""Judging players: players from spec strings (``players``), games and openings (``arena``), Elo, SPRT and
intervals (``elo``), the training arena's openings, scoring and promotion (``promotion``), the evaluation
commands' work, one module each (``match``, ``tournament``, ``ratings``, ``puzzles``), plots (``plots``).
Serving a player (UCI, terminal play) is ``alphazero.serve``'s."""
