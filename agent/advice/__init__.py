"""``specwatch recommend``: from stored history, the lookahead K and on/off each domain supports and one K
for a whole pod (``recommend``), printed as each engine's start-up flags (``engine_flags``).
"""
