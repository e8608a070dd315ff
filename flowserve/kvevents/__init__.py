"""The engines' KV-cache events: the wire format (`wire`), per-stream sequence tracking
(`stream`), the ZMQ subscriber of the gateway (`subscriber`) and the publisher the
simulated engines and the tests use (`publisher`)."""
