"""Online tuning of policy parameters: trace recorder, α sweep, the online α tuner."""
