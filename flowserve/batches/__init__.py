"""The OpenAI Batch API's jobs: input files of requests, run in the scheduler's batch class,
their results kept durably and written back as output and error files
(docs/serving.md, "The Batch API")."""
