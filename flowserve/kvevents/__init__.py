"""The engines' KV-cache events: the wire format (`wire`), per-rank sequence tracking
(`stream`), the gateway's ZMQ subscriber (`subscriber`), an instance's `kv_events:` entry
(`config`), a simulated engine's blocks published the same way (`engine_blocks`), and a
vLLM-protocol publisher for tests and benchmarks (`publisher`, `flood`)."""
