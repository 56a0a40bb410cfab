"""``specwatch guard``: the acceptance a draft will get against a new target, per domain, before the target
ships, and what to do about each domain (policies/rollout.py). See docs/guard.md."""

from agent.guard.report import DomainReport, GuardReport, guard

__all__ = ["guard", "GuardReport", "DomainReport"]
