"""Real retrieval components that run offline and install with the project (Teola's
non-LLM engines): embeddings (`wordllama`), a vector index (`usearch`), rerank by
cross-scoring embeddings, a BM25 web-search service in its own process (`bm25s`) with
a client shaped like a hosted search API, the corpus chunker, and the executors the
gateway runs for the retrieval ops (`flowserve.retrieval.executors`)."""
