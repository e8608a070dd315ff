pytest_plugins = ["fixtures_llama"]
