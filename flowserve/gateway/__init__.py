"""The live driver and its HTTP API: the loop around the scheduler core (`driver`), engine
calls with retries, circuit breakers and probes (`calls`), admission, tokenization for
routing (`routing_tokens`), tools and jobs, the OpenAI-compatible FastAPI app (`app`,
`openai_api`), Prometheus metrics, settings and the server process."""
