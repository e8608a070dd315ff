"""LLM engines as the gateway talks to them: the OpenAI-compatible HTTP client
(`client`) and backend (`openai_backend`), simulated engines that run in real time
(`simbackend`), llama.cpp's server (`llamacpp_build`, `llamacpp_server`) and the tiny
model the tests serve with it (`tinymodel`)."""
