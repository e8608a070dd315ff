"""Served applications, each a `Workflow` written once for the simulator and the gateway:
the CHESS-style Text-to-SQL agent (`text2sql/`), Teola's RAG and search apps (`teola`,
`teola_served`), the one-call query every OpenAI request becomes (`single`), and the
registry of workflows the gateway serves by name (`registry`)."""
