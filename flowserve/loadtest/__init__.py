"""Tools of the live benchmarks, each usable on its own: servers as child processes stopped
with their process group (`procs`), the load client (`load_client`) and the programs'
client (`program_client`) that run in their own processes, and an instant
OpenAI-compatible backend (`instant_backend`) that measures nothing but the router in
front of it."""
