"""Bounds on configuration values that have no sane meaning beyond them, each with where
it comes from. The config models (`flowserve.config`, `flowserve.workloads`) enforce
them, so an error names the field, the bound and this reason.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from flowserve.graph.plan import MAX_SEGMENT
from flowserve.graph.replay import PLAN_MAX_TOKENS
from flowserve.schema import at_most

# A workload is built in memory before it runs: ~8 KB per Text-to-SQL query (measured
# with tracemalloc), so 10^6 queries take ~8 GB before the simulation starts.
MAX_QUERIES = 1_000_000
WHY_QUERIES = "a workload is built in memory, ~8 KB per query"

# Dispatch scans every instance per decision; 1,024 instances are 8,192 GPUs at TP 8, far
# beyond the clusters of the papers we follow (Hexgen: 4 instances, Preble: 2-4).
MAX_INSTANCES = 1024
WHY_INSTANCES = "dispatch scans every instance per decision"

# vLLM: "Total number of attention heads must be divisible by tensor parallel size".
WHY_TP = "vLLM shards attention heads: heads must be divisible by tp"

# vLLM's --block-size choices end at 128 (CUDA); a block larger than this wastes most of
# the KV cache on padding.
MAX_BLOCK_SIZE = 256
WHY_BLOCK_SIZE = "vLLM's largest --block-size is 128"

# CHESS's traces hold 2 SQL candidates per query; one parallel step of 64 calls already
# fills a quarter of an engine's batch (vLLM's max_num_seqs default is 256).
MAX_CANDIDATES = 64
# CHESS's revision loop stops after 10 rounds by default.
MAX_ROUNDS = 100

# The workflow IR's largest prompt segment (graph/prompt.py MAX_SEGMENT): a generated
# prompt is a shared and a unique segment.
MAX_PROMPT_TOKENS = MAX_SEGMENT
WHY_PROMPT = f"the workflow IR's largest prompt segment is {MAX_SEGMENT:,} tokens (graph/prompt.py)"
# A plan's calls ask for at most PLAN_MAX_TOKENS (graph/replay.py): a longer output would
# be cut there silently.
MAX_OUTPUT_TOKENS = PLAN_MAX_TOKENS
WHY_OUTPUT = f"a plan's calls ask for max_tokens={PLAN_MAX_TOKENS:,} (graph/replay.py)"

# Longer than any released model's context (Llama 4 Scout: 10M tokens).
MAX_CONTEXT = 1 << 24
# Larger than any released dense or MoE model (the largest are ~2T parameters).
MAX_PARAMS_B = 100_000.0

# Seeds feed numpy's SeedSequence, which takes non-negative integers; 2^64 keeps them a
# uint64 like every other RNG seed.
MAX_SEED = 2**64 - 1

# Lognormal spread of generated lengths: sd 3 already spreads lengths over ×20 either way;
# larger ones overflow the draw to infinity.
MAX_SD_LOG = 3.0

# A tool op (or recorded op) longer than a day is no serving workload (and inf would
# make every mean latency inf).
MAX_OP_SECONDS = 86_400.0

WHY_CONTEXT = "longer than any released model's context"
WHY_PARAMS = "larger than any released model"
WHY_SEED = "numpy seeds are unsigned 64-bit"
WHY_SD_LOG = "a wider lognormal overflows"
WHY_OP = "a tool op longer than a day"

# Field types carrying the bounds (the error names the limit and its reason).
Queries = Annotated[int, Field(gt=0), at_most(MAX_QUERIES, WHY_QUERIES)]
Seed = Annotated[int, Field(ge=0), at_most(MAX_SEED, WHY_SEED)]
InstanceCount = Annotated[int, Field(ge=1), at_most(MAX_INSTANCES, WHY_INSTANCES)]
BlockSize = Annotated[int, Field(ge=1), at_most(MAX_BLOCK_SIZE, WHY_BLOCK_SIZE)]
Candidates = Annotated[int, Field(ge=2), at_most(MAX_CANDIDATES, "CHESS's traces hold 2; 64 fill a quarter "
                                                                  "of vLLM's default batch of 256")]
Rounds = Annotated[int, Field(ge=0), at_most(MAX_ROUNDS, "CHESS stops revising after 10 rounds by default")]
PromptTokens = Annotated[int, Field(ge=0), at_most(MAX_PROMPT_TOKENS, WHY_PROMPT)]
OutputTokens = Annotated[int, Field(gt=0), at_most(MAX_OUTPUT_TOKENS, WHY_OUTPUT)]
Context = Annotated[int, Field(ge=1), at_most(MAX_CONTEXT, WHY_CONTEXT)]
ParamsB = Annotated[float, Field(gt=0), at_most(MAX_PARAMS_B, WHY_PARAMS)]
SdLog = Annotated[float, Field(ge=0), at_most(MAX_SD_LOG, WHY_SD_LOG)]
OpSeconds = Annotated[float, Field(ge=0), at_most(MAX_OP_SECONDS, WHY_OP)]
