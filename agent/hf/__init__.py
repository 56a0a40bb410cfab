"""specwatch inside transformers' ``generate()``: assisted decoding whose lookahead a Sidecar chooses and
records, step by step (agent/hf/generate.py, agent/hf/candidates.py)."""

from agent.hf.candidates import SpecwatchCandidateGenerator
from agent.hf.generate import Steering, specwatch_generate, version_of

__all__ = ["SpecwatchCandidateGenerator", "Steering", "specwatch_generate", "version_of"]
