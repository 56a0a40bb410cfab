"""Giving memory back to the system after a burst (100k domains that came and went).

CPython's small-object allocator (pymalloc) takes memory from the system in 1 MiB arenas and returns an arena
only when every object in it is gone. After a burst, a few long-lived objects allocated during it (cache
entries, the newest windows) pin most of the burst's arenas: measured on ``specwatch serve`` after 100k
domains had come and gone, 3 MB of survivors held 100 arenas (100 MB) that no later work filled. With the
system allocator (``PYTHONMALLOC=malloc``) the same survivors pin 4 KiB pages instead, and glibc's
``malloc_trim`` hands every free page back. So the long-running commands (serve, proxy) restart themselves
once, before they do anything, with ``PYTHONMALLOC=malloc`` unless the variable is already set (set it to
``pymalloc`` to keep CPython's default), and the sidecar calls :func:`release` after evicting domains.
Figures: docs/durability.md.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import os
import sys
from functools import cache

log = logging.getLogger("specwatch.memory")
ALLOCATOR = "PYTHONMALLOC"
MMAP_THRESHOLD = "MALLOC_MMAP_THRESHOLD_"  # glibc's tunable; setting it also turns its rise off


@cache
def _libc():
    """glibc, or None where malloc_trim does not exist (musl, macOS)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


def release(collect: bool = False) -> bool:
    """Return the allocator's free pages to the system (glibc's malloc_trim); False where unsupported.
    ``collect``: first collect cyclic garbage of every generation (a full collection pauses every thread
    for tens of ms: after a burst, not after every eviction)."""
    libc = _libc()
    if libc is None:
        return False
    if collect:
        gc.collect()
    libc.malloc_trim(0)  # ctypes drops the GIL for the call
    return True


def settle(store, evicted: bool) -> None:
    """After a domain-eviction pass: shrink the store's tables once a burst has gone (``store.compact()``)
    and trim; a full collection only after a burst."""
    compacted = store.compact()
    if compacted or evicted:
        release(collect=compacted)


def restart_with_system_allocator() -> None:
    """Replace this process (same pid, same arguments) by one that allocates with the system allocator,
    unless PYTHONMALLOC is already set or glibc's malloc_trim is missing. Call before threads or files.

    glibc's mmap threshold is fixed at its initial 128 KiB too (unless the operator set it): by default it
    rises to the largest block freed so far, after which request bodies and flush batches of a few hundred
    KiB come from the heap and leave holes among long-lived objects; above the threshold each is mapped
    and unmapped whole. Measured after 100k domains: RSS 211 MB with the rising threshold, 201 MB fixed."""
    if ALLOCATOR in os.environ or _libc() is None or not getattr(sys, "orig_argv", None):
        return
    env = {MMAP_THRESHOLD: str(128 * 1024), **os.environ, ALLOCATOR: "malloc"}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
