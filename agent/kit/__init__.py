"""The model kit: small byte-level models trained locally (target v1, a distilled draft, target v2).

``specwatch models build`` trains them; :func:`load_kit` loads them for decoding and benchmarks.
"""

from agent.kit.load import Kit, KitNotBuiltError, load_kit, load_model

__all__ = ["Kit", "KitNotBuiltError", "load_kit", "load_model"]
