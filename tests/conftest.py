pytest_plugins = ["fixtures_llama", "fixtures_retrieval"]
