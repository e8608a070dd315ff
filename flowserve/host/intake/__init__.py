"""What a request brings, read and checked the same for both faces: OpenAI requests
(`openai_requests`) and errors (`openai_api`), tenants and classes (`tenancy`), program
headers (`program_headers`), and large inputs handled off the event loop (`offload`)."""
