"""Policies by name, for the CLI, the sidecar's configuration and the benchmark.

``fixed:K``, ``heuristic``, ``thompson``, ``sliding-ucb``, ``model-based``, ``confidence-stop`` (early stop
on top of model-based), ``pool-ucb``, ``pool-model`` and ``pool-cap`` (arms restricted to the pools a proxy
routes to; pool-cap for pools whose K caps a drafting that varies per step); append ``+switch`` to put the
policy behind the on/off switch.
"""

from __future__ import annotations

from policies.base import Policy

NAMES = ("fixed:K", "heuristic", "thompson", "sliding-ucb", "model-based", "confidence-stop", "pool-ucb",
         "pool-model", "pool-cap")
SWITCH = "+switch"


def make(name: str, kmax: int = 8, seed: int | None = None) -> Policy:
    """A fresh policy; ValueError names the accepted spellings."""
    if name.endswith(SWITCH):
        from policies.switch import Switch, SwitchConfig
        from policies.switched import Switched

        inner = make(name[: -len(SWITCH)], kmax, seed)
        # A pool policy's outcomes are whole requests: the switch counts requests, not steps. One that weighs
        # K = 0 itself (measured once for all domains) is not overruled: the switch only reports.
        config = (SwitchConfig.deferring() if getattr(inner, "weighs_off", False)
                  else SwitchConfig.per_request() if getattr(inner, "per_request", False) else None)
        return Switched(inner, Switch(config, seed=seed))
    base, _, arg = name.partition(":")
    if base == "fixed":
        from policies.fixed import Fixed

        if not arg.isdigit():
            raise ValueError(f"policy: write fixed:K with K in 0..{kmax}, got {name!r}")
        return Fixed(int(arg), kmax=kmax)
    if arg:
        raise ValueError(f"policy: only fixed takes an argument, got {name!r}")
    if base == "heuristic":
        from policies.heuristic import Heuristic

        return Heuristic(kmax=kmax)
    if base == "thompson":
        from policies.thompson import DiscountedThompson

        return DiscountedThompson(kmax=kmax, seed=seed)
    if base == "sliding-ucb":
        from policies.sliding_ucb import SlidingWindowUCB

        return SlidingWindowUCB(kmax=kmax, seed=seed)
    if base == "model-based":
        from policies.model_based import ModelBased

        return ModelBased(kmax=kmax, seed=seed)
    if base == "pool-ucb":
        from policies.pool_ucb import PoolUCB

        return PoolUCB(kmax=kmax, seed=seed)
    if base == "pool-model":
        from policies.pool_model import PoolModel

        return PoolModel(kmax=kmax, seed=seed)
    if base == "pool-cap":
        from policies.pool_cap import PoolCap

        return PoolCap(kmax=kmax, seed=seed)
    if base == "confidence-stop":
        from policies.confidence import ConfidenceStop
        from policies.model_based import ModelBased

        return ConfidenceStop(ModelBased(kmax=kmax, seed=seed), kmax=kmax, seed=seed)
    raise ValueError(f"policy: unknown {name!r}; choose from {', '.join(NAMES)} (optionally with {SWITCH})")
