"""Per-request TTFT/TPOT objectives in dispatch: the latency predictor's features, the
online predictor, the SLO-headroom formula and the `flowserve_slo` dispatch policy."""
