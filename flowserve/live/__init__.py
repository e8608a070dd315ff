"""The live side: engine clients, the asyncio driver over the scheduler core, the gateway."""
