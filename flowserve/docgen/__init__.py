"""Reference pages of the docs site generated from the code, so they cannot drift: the
configuration reference from the pydantic models' field descriptions, the policy
catalogue from the policy registries, the command line from its commands. `python -m
flowserve.docgen` writes them; the site's build hook (`mkdocs_hook`) does too, and a test
checks they are current."""
