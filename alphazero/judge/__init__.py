"""Judging players: players from spec strings (``players``), games and openings (``arena``), Elo, SPRT and
intervals (``elo``), the training arena's openings, scoring and promotion (``promotion``), the evaluation
commands' work, one module each (``match``, ``ratings``, ``puzzles``, ``play``), the UCI engine (``uci``,
``uci_protocol``, ``uci_limits``), plots (``plots``)."""
