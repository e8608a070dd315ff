"""The live host: the scheduler core, the live driver around it (`driver`), the engine
calls with retries, circuit breakers and probes (`calls`), queries (`query`,
`query_book`), programs (`programs`), admission, tokenization for routing
(`routing_tokens`), tools and jobs, the engines' cache feeds, the recorder, metrics,
settings and replicas (`replica`); and the intake both faces start requests through
(`intake`). The faces — HTTP (`flowserve.gateway`) and Envoy's endpoint picker
(`flowserve.picker`) — depend on the host; the host depends on neither."""
