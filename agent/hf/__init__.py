"""specwatch inside transformers' ``generate()``: assisted decoding whose lookahead a Sidecar chooses and
records, step by step (agent/hf/generate.py, agent/hf/candidates.py)::

    from agent.hf import in_process, specwatch_generate
    runtime = in_process(db="sqlite:///specwatch.db")  # the sidecar of `specwatch serve`, in this process
    out = specwatch_generate(model, draft, runtime.sidecar, domain="code", input_ids=ids, max_new_tokens=64)
"""

from agent.hf.candidates import SpecwatchCandidateGenerator
from agent.hf.generate import Steering, specwatch_generate, version_of
from agent.hf.runtime import in_process

__all__ = ["SpecwatchCandidateGenerator", "Steering", "in_process", "specwatch_generate", "version_of"]
