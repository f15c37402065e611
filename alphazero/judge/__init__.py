"""Judging players: players from spec strings (``players``), matches (``arena``), Elo and SPRT (``elo``),
the evaluation commands (``evaluate``), the UCI engine (``uci``, ``uci_protocol``, ``uci_limits``), plots."""
