"""Tools of the live benchmarks, each usable on its own: servers as child processes stopped
with their process group (`procs`), wrk as the load generator (`wrk`), the programs'
client (`program_client`) that runs in its own process, and an instant
OpenAI-compatible backend (`instant_backend`) that measures nothing but the router in
front of it."""
