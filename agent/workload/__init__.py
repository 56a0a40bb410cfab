"""A realistic workload for the real model: per-domain chat prompt sets kept in the repository, and a driver
that replays a mix of them through any OpenAI-compatible endpoint.

- :mod:`agent.workload.prompts`: load and validate the prompt sets (``data/<domain>.jsonl``);
- :mod:`agent.workload.sources`: the templates the sets are written from, one module per domain;
- :mod:`agent.workload.build`: write the sets from the templates (``python -m agent.workload.build``);
- :mod:`agent.workload.mix`: a traffic mix and its shifts over time, as pure functions;
- :mod:`agent.workload.requests`: one prompt as the request body of each API the driver speaks;
- :mod:`agent.workload.replay`: the driver (concurrent requests, the domain header, one result each);
- :mod:`agent.workload.tally`: the per-domain summary of a replay.
"""
