"""The virtual-time driver: simulated engines and the discrete-event loop."""
