pytest_plugins = ["fixtures_llama", "fixtures_text2sql", "fixtures_retrieval"]
