"""``copy``: the answer largely copies text from the prompt (repeat, quote or reformat a paragraph). The
paragraphs are the first paragraphs of the Python standard library's own docstrings, real English text that
ships with every Python, so n-gram self-speculation finds long matches in the prompt. The set was written
from Python 3.11's; another Python's docstrings differ a little, which is why the set is kept as a file."""

from __future__ import annotations

import importlib
import inspect
import warnings

from agent.workload.sources.base import Item, user

TASKS = (
    "Repeat the following text exactly:\n\n{p}",
    "Copy this paragraph word for word and put it in quotation marks:\n\n{p}",
    "Here is a note:\n\n{p}\n\nWrite the note again, unchanged.",
    "Rewrite the text below with the same words, one sentence per line:\n\n{p}",
    "Quote the following documentation verbatim, then say which module it is from ({m}):\n\n{p}",
)
MODULES = ("json", "csv", "collections", "itertools", "functools", "pathlib", "re", "string", "textwrap",
            "datetime", "heapq", "bisect", "statistics", "random", "math", "os", "shutil", "tempfile",
            "argparse", "logging", "threading", "queue", "subprocess", "socket", "sqlite3", "zipfile",
            "tarfile", "gzip", "hashlib", "hmac", "base64", "binascii", "struct", "codecs", "unicodedata",
            "difflib", "pprint", "enum", "dataclasses", "typing", "contextlib", "abc", "copy", "pickle",
            "shelve", "glob", "fnmatch", "calendar", "time", "locale", "gettext", "decimal", "fractions",
            "numbers", "operator", "inspect", "traceback", "warnings", "weakref", "array", "uuid", "io",
            "email", "http.client", "urllib.parse", "urllib.request", "xml.etree.ElementTree", "html",
            "configparser", "tomllib", "secrets", "ssl", "select", "signal", "mmap", "asyncio", "concurrent.futures",
            "multiprocessing", "sched", "graphlib", "ipaddress", "mimetypes", "wave", "colorsys", "zlib",
            "lzma", "bz2", "filecmp", "stat", "platform", "errno", "ctypes", "unittest", "doctest", "timeit",
            "cProfile", "pdb", "ast", "dis", "tokenize", "keyword", "importlib", "pkgutil", "sysconfig",
            "smtplib", "ftplib", "poplib", "imaplib", "xmlrpc.client", "socketserver", "http.server",
            "wsgiref.simple_server", "optparse", "getopt", "readline", "cmd", "shlex", "tkinter")


def paragraphs() -> list[tuple[str, str]]:
    """(module, paragraph) pairs: first paragraphs of 120-480 characters of standard library docstrings (of
    modules, their public functions and classes, and the classes' public methods)."""
    with warnings.catch_warnings():  # reading deprecated members' docstrings warns (typing.re, ...)
        warnings.simplefilter("ignore", DeprecationWarning)
        return _collect()


def _collect() -> list[tuple[str, str]]:
    out, seen = [], set()
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # e.g. tkinter without Tk: its text is simply not used
            continue
        members = [module]
        for key, obj in sorted(vars(module).items()):
            if key.startswith("_") or getattr(obj, "__module__", None) != name:
                continue
            if inspect.isfunction(obj):
                members.append(obj)
            elif inspect.isclass(obj):
                members.append(obj)
                members += [m for k, m in sorted(vars(obj).items()) if not k.startswith("_") and inspect.isfunction(m)]
        for obj in members:
            doc = inspect.getdoc(obj) or ""
            first = " ".join(doc.split("\n\n", 1)[0].split())
            if 120 <= len(first) <= 480 and first not in seen and first.isascii():
                seen.add(first)
                out.append((name, first))
    return out


def items() -> list[Item]:
    """Two of the tasks per paragraph; the paragraph is the group (it stays in one split)."""
    found = []
    for i, (module, paragraph) in enumerate(paragraphs()):
        for task in (i, i + 2):
            found.append((paragraph, user(TASKS[task % len(TASKS)].format(p=paragraph, m=module))))
    return found
