"""specwatch inside transformers' ``generate()``: assisted decoding whose lookahead a Sidecar chooses and
records, step by step, with a draft model (agent/hf/candidates.py) or by prompt lookup, no draft model
(agent/hf/lookup.py); the loop's wiring in agent/hf/generate.py, step timing and records in agent/hf/steps.py::

    from agent.hf import in_process, specwatch_generate
    runtime = in_process(db="sqlite:///specwatch.db")  # the sidecar of `specwatch serve`, in this process
    out = specwatch_generate(model, draft, runtime.sidecar, domain="code", input_ids=ids, max_new_tokens=64)
    out = specwatch_generate(model, None, runtime.sidecar, domain="code", prompt_lookup=True, input_ids=ids,
                             max_new_tokens=64)
"""

from agent.hf.candidates import SpecwatchCandidateGenerator
from agent.hf.generate import Steering, specwatch_generate, version_of
from agent.hf.lookup import LOOKUP_VERSION, SpecwatchLookupGenerator
from agent.hf.runtime import in_process

__all__ = ["LOOKUP_VERSION", "SpecwatchCandidateGenerator", "SpecwatchLookupGenerator", "Steering", "in_process",
           "specwatch_generate", "version_of"]
