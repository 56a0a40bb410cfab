"""Per-domain chat prompts for the pretrained model: distillation, benchmarks and tests (no downloads).

Two domains where speculation pays differently:

- ``copy``: the answer largely copies text from the prompt (repeat, quote, reformat a paragraph). The
  paragraphs are the first paragraphs of the Python standard library's own docstrings, real English text
  that ships with every Python, so n-gram self-speculation finds long matches in the prompt.
- ``chat``: open questions and requests over topics written here; the answer is new text, so drafts come
  from the model's habits (a distilled draft) more than from the prompt.

Every prompt lands in ``train`` or ``heldout`` by a hash of its text (half held out), so the draft is
distilled on prompts the benchmarks never send, and a benchmark of 200 requests per domain sends no prompt
twice.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import warnings
from dataclasses import dataclass

DOMAINS = ("copy", "chat")
SPLITS = ("train", "heldout")

_COPY_TASKS = (
    "Repeat the following text exactly:\n\n{p}",
    "Copy this paragraph word for word and put it in quotation marks:\n\n{p}",
    "Here is a note:\n\n{p}\n\nWrite the note again, unchanged.",
    "Rewrite the text below with the same words, one sentence per line:\n\n{p}",
    "Quote the following documentation verbatim, then say which module it is from ({m}):\n\n{p}",
)
_MODULES = ("json", "csv", "collections", "itertools", "functools", "pathlib", "re", "string", "textwrap",
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
_CHAT_TASKS = (
    "What is {t}?", "Explain {t} in simple words.", "Give me three facts about {t}.",
    "Write a short story about {t}.", "Why do people care about {t}?",
    "How would you describe {t} to a friend?", "Write a short poem about {t}.",
    "What are the pros and cons of {t}?",
)
_TOPICS = (
    "the moon", "rain forests", "coffee", "bicycles", "volcanoes", "the ocean", "friendship", "honey bees",
    "the internet", "chess", "music", "gardening", "winter", "trains", "libraries", "cooking pasta",
    "the sun", "elephants", "mountains", "a rainy day", "learning a language", "dogs", "cats", "bread",
    "electric cars", "the history of writing", "recycling", "sleep", "exercise", "the desert",
    "birthdays", "a city at night", "rivers", "clocks", "photography", "the stars", "football", "paper",
    "robots", "kindness", "summer holidays", "clouds", "maps", "tea", "the color blue", "snow",
    "museums", "a lighthouse", "owls", "apples", "saving money", "public speaking", "the wind",
    "board games", "bridges", "birds", "islands", "autumn leaves", "a good breakfast", "space travel",
)


@dataclass(frozen=True)
class Prompt:
    """One request: its domain, split and the chat messages sent (OpenAI format)."""

    domain: str
    split: str
    text: str

    @property
    def messages(self) -> list[dict[str, str]]:
        return [{"role": "user", "content": self.text}]


def _split(text: str) -> str:
    return "heldout" if hashlib.sha256(text.encode()).digest()[0] % 2 == 0 else "train"


def _paragraphs() -> list[tuple[str, str]]:
    """(module, paragraph) pairs: first paragraphs of 120-480 characters of standard library docstrings (of
    modules, their public functions and classes, and the classes' public methods)."""
    with warnings.catch_warnings():  # reading deprecated members' docstrings warns (typing.re, ...)
        warnings.simplefilter("ignore", DeprecationWarning)
        return _collect()


def _collect() -> list[tuple[str, str]]:
    out, seen = [], set()
    for name in _MODULES:
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


def prompts(domain: str | None = None, split: str | None = None) -> list[Prompt]:
    """The prompts of ``domain`` (default every domain) in ``split`` (default both), in a fixed order."""
    if domain is not None and domain not in DOMAINS:
        raise ValueError(f"domain: expected one of {', '.join(DOMAINS)}, got {domain!r}")
    if split is not None and split not in SPLITS:
        raise ValueError(f"split: expected one of {', '.join(SPLITS)}, got {split!r}")
    found = []
    if domain in (None, "copy"):
        for i, (module, paragraph) in enumerate(_paragraphs()):
            for task in (i, i + 2):  # two of the tasks per paragraph
                text = _COPY_TASKS[task % len(_COPY_TASKS)].format(p=paragraph, m=module)
                found.append(Prompt("copy", _split(paragraph), text))  # a paragraph stays in one split
    if domain in (None, "chat"):
        for i, topic in enumerate(_TOPICS):
            for j, task in enumerate(_CHAT_TASKS):
                text = task.format(t=topic)
                found.append(Prompt("chat", _split(text), text))
    return [p for p in found if split is None or p.split == split]
