"""`specwatch proxy`: an OpenAI-compatible reverse proxy in front of stock engines (llama.cpp, vLLM, SGLang,
TensorRT-LLM).

It reads each answer's speculation figures with the pool's engine adapter (agent/proxy/engines/) into one
aggregate StepRecord per request, and acts without patching the engine by routing each domain's requests
between upstream pools that run with different fixed draft lengths (``kN``) or none (``off``).
"""
