"""Learning: replay shards and the sampling window (``replay``), the learner (``train``), a training run's
decisions (``run``: resume checks, training pace, stop), learning-health reports (``diagnose``) and live
curves (``curves``)."""
