"""Speculative decoding in this process: the decoder (``decoder``: SpeculativeDecoder), its sampling rules
(``sampling``), the lookahead asked of a Sidecar before every step (``steer``), the measured step cost
(``cost_model``), devices and dtypes (``devices``), model versions as weight hashes (``versions``) and the
side-by-side comparison `specwatch decode` prints (``showcase``).
"""
