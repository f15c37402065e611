"""Learning: replay shards and the sampling window (``replay``), the learner (``train``), learning-health
reports (``diagnose``) and live curves (``curves``)."""
