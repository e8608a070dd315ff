"""Learned models the core uses through its protocols (the latency predictor's models), on
libraries the core itself does not import."""
