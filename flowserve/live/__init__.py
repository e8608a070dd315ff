"""The live driver's IO side: engine processes, engine clients, profiling."""
