"""Workflow graphs: nodes, query plans, per-query programs and the graph runtime."""
