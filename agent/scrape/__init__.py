"""``specwatch scrape``: records for engines that cannot call the sidecar, from the deltas of their metrics
pages.

``pages`` reads each engine's page (vLLM, llama.cpp, SGLang, TensorRT-LLM) into counts, ``records`` turns
one interval's counts into records, ``names`` says which domain and pod they go to, ``io`` fetches pages and
sends records, ``scraper`` keeps the last counts of every series and runs the loop, and ``run`` runs the
command from its options.
"""
