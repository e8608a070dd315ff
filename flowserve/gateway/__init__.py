"""The gateway's HTTP face: the raw ASGI front (`asgi`) for the OpenAI LLM routes
(`llm`), the FastAPI app for workflows, queries, programs, admin and metrics (`app`), the
live status page (`status`) and the uvicorn server (`server`). Everything it serves runs
on the live host (`flowserve.host`); it never imports the picker face (`flowserve.picker`)."""
