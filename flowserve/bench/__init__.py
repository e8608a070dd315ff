"""Metrics, reports and the benchmark experiments."""
