"""Building and running a sidecar: its configuration (``config``: SidecarConfig; ``options``: the groups it
hands out, such as the jobs' intervals and the HTTP limits), the one wiring function
``serve``, ``proxy`` and the in-process runtime share (``wiring``), the scheduler's jobs (``jobs``, ``fleet``),
running under uvicorn until a signal (``lifecycle``) and closing within a deadline (``closing``), in-process
generation for POST /v1/generate (``generator``), the opt-in sample of live prompts (``prompt_sampler``) and
times on the command line (``times``).
"""
