"""The sans-IO scheduler core (see `flowserve.core.scheduler`)."""
