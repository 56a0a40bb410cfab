"""``code``: complete a function from its signature and docstring. The answer repeats the signature and the
names the prompt introduces, then writes new code: n-gram lookup helps on the repeated part, a draft that
knows common idioms on the rest."""

from __future__ import annotations

from agent.workload.sources.base import Item, user

SYSTEM = "You are a careful programming assistant. Answer with code in one fenced block, then at most one sentence."

# (language, the start of the code the user wants finished)
STUBS = (
    ("python", 'def is_palindrome(text: str) -> bool:\n    """True when text reads the same backwards, ignoring '
               'case, spaces and punctuation."""\n'),
    ("python", 'def chunked(items: list, size: int) -> list[list]:\n    """Split items into consecutive lists of '
               'at most size elements."""\n'),
    ("python", 'def word_counts(path: str) -> dict[str, int]:\n    """Count how often each lower-cased word occurs '
               'in the text file at path."""\n'),
    ("python", 'def flatten(nested: list) -> list:\n    """Flatten arbitrarily nested lists into one flat list, '
               'keeping the order."""\n'),
    ("python", 'def median(values: list[float]) -> float:\n    """The median of a non-empty list of numbers; raise '
               'ValueError on an empty list."""\n'),
    ("python", 'def parse_duration(text: str) -> int:\n    """Parse durations like "1h30m", "45s" or "2m5s" into '
               'seconds."""\n'),
    ("python", 'def merge_intervals(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:\n    """Merge '
               'overlapping closed intervals and return them sorted by start."""\n'),
    ("python", 'def slugify(title: str) -> str:\n    """Turn a title into a URL slug: lower case, ASCII letters '
               'and digits, words joined by hyphens."""\n'),
    ("python", 'class LRUCache:\n    """A least-recently-used cache holding at most capacity items."""\n\n'
               '    def __init__(self, capacity: int):\n        self.capacity = capacity\n'
               '        self.items = {}\n\n    def get(self, key):\n'),
    ("python", 'def read_csv_rows(path: str) -> list[dict[str, str]]:\n    """Read a CSV file with a header row and '
               'return one dict per row."""\n    import csv\n\n'),
    ("python", 'def retry(times: int, delay: float):\n    """A decorator that retries the wrapped function up to '
               'times times, sleeping delay seconds between tries."""\n'),
    ("python", 'def binary_search(items: list[int], target: int) -> int:\n    """Index of target in the sorted list '
               'items, or -1 when it is absent."""\n    low, high = 0, len(items) - 1\n'),
    ("python", 'def group_by(records: list[dict], key: str) -> dict[str, list[dict]]:\n    """Group records by the '
               'value of one of their keys, keeping each group in input order."""\n'),
    ("python", 'def top_k(scores: dict[str, float], k: int) -> list[tuple[str, float]]:\n    """The k highest-scoring '
               '(name, score) pairs, best first; ties broken by name."""\n'),
    ("python", 'def fizzbuzz(n: int) -> list[str]:\n    """FizzBuzz from 1 to n: multiples of 3 are Fizz, of 5 Buzz, '
               'of both FizzBuzz."""\n'),
    ("python", 'def dedupe(items: list) -> list:\n    """Remove duplicates from items, keeping the first occurrence '
               'of each."""\n    seen = set()\n'),
    ("python", 'def roman_to_int(numeral: str) -> int:\n    """Convert a Roman numeral such as "MCMXCIV" to an '
               'integer."""\n    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}\n'),
    ("python", 'async def fetch_all(client, urls: list[str]) -> list[str]:\n    """Fetch every URL concurrently with '
               'the given httpx.AsyncClient and return the bodies in order."""\n'),
    ("python", 'def validate_email(address: str) -> bool:\n    """A simple check: one @, a non-empty local part and a '
               'domain with a dot."""\n'),
    ("python", 'def moving_average(values: list[float], window: int) -> list[float]:\n    """Averages of every run of '
               'window consecutive values."""\n'),
    ("python", '@dataclass\nclass Invoice:\n    number: str\n    lines: list[tuple[str, int, float]]  # item, '
               'quantity, unit price\n\n    def total(self) -> float:\n'),
    ("python", 'def tail(path: str, n: int = 10) -> list[str]:\n    """The last n lines of a text file, without '
               'reading the whole file into memory."""\n'),
    ("python", 'def transpose(matrix: list[list[int]]) -> list[list[int]]:\n    """Rows become columns."""\n'),
    ("python", 'def camel_to_snake(name: str) -> str:\n    """Convert "parseHttpResponse" to '
               '"parse_http_response"."""\n    import re\n\n'),
    ("javascript", 'function debounce(fn, wait) {\n  // Call fn only after wait milliseconds have passed without '
                   'another call.\n'),
    ("javascript", 'function groupBy(items, keyFn) {\n  // Return an object mapping each key to the items that '
                   'have it.\n'),
    ("javascript", 'async function getJson(url) {\n  // Fetch url, throw on a non-2xx status, and return the parsed '
                   'JSON body.\n'),
    ("javascript", 'function formatBytes(bytes) {\n  // Human-readable size: 1536 -> "1.5 KB", 1048576 -> '
                   '"1.0 MB".\n'),
    ("javascript", 'class Stack {\n  constructor() {\n    this.items = [];\n  }\n\n  push(item) {\n'),
    ("sql", '-- Total revenue per customer in 2024, highest first.\n-- Tables: customers(id, name), orders(id, '
            'customer_id, placed_at, amount)\nSELECT c.name,\n'),
    ("sql", '-- The five products sold most often last month.\n-- Tables: products(id, name), order_lines(order_id, '
            'product_id, quantity), orders(id, placed_at)\nSELECT\n'),
    ("bash", '#!/usr/bin/env bash\n# Back up every .conf file under /etc into a dated tar.gz in /var/backups,\n# '
             'and delete backups older than 30 days.\nset -euo pipefail\n'),
)
NAMES = {"python": "Python", "javascript": "JavaScript", "sql": "SQL", "bash": "Bash"}
TASKS = (
    "Complete the following {name} code:\n\n```{lang}\n{code}```",
    "Finish this {name} implementation. Reply with the whole thing in one code block.\n\n```{lang}\n{code}```",
    "Here is the start of some {name} code. Continue it where it stops.\n\n```{lang}\n{code}```",
    "Fill in the rest of this:\n\n```{lang}\n{code}```\n\nKeep the names as they are.",
)


def items() -> list[Item]:
    """Every task over every stub; the stub is the group. Every other prompt carries the system message."""
    found = []
    for i, (lang, code) in enumerate(STUBS):
        for j, task in enumerate(TASKS):
            text = task.format(lang=lang, name=NAMES[lang], code=code)
            found.append((code, user(text, SYSTEM if (i + j) % 2 == 0 else None)))
    return found
