"""``edit``: make a small change to a function and give it back whole. Most of the answer is the prompt's own
code, so n-gram self-speculation drafts long runs that are accepted: the domain where it pays most."""

from __future__ import annotations

import re

from agent.workload.sources.base import Item, user

SYSTEM = "You edit code. Return the complete edited code in one fenced block and nothing else."

SNIPPETS = (
    "def total_price(items, tax_rate):\n    subtotal = 0\n    for item in items:\n        subtotal += item.price "
    "* item.quantity\n    tax = subtotal * tax_rate\n    return round(subtotal + tax, 2)\n",
    "def load_config(path):\n    with open(path) as f:\n        lines = f.readlines()\n    config = {}\n    for line "
    "in lines:\n        if '=' in line and not line.startswith('#'):\n            key, value = line.split('=', 1)\n"
    "            config[key.strip()] = value.strip()\n    return config\n",
    "def count_vowels(text):\n    count = 0\n    for ch in text.lower():\n        if ch in 'aeiou':\n            "
    "count += 1\n    return count\n",
    "def send_welcome(user, mailer):\n    subject = 'Welcome, ' + user.name + '!'\n    body = 'Hi ' + user.name + "
    "', thanks for joining on ' + str(user.joined) + '.'\n    mailer.send(user.email, subject, body)\n    return "
    "True\n",
    "def normalize(scores):\n    low = min(scores)\n    high = max(scores)\n    if high == low:\n        return "
    "[0.0 for _ in scores]\n    return [(s - low) / (high - low) for s in scores]\n",
    "def find_user(users, email):\n    for user in users:\n        if user['email'].lower() == email.lower():\n"
    "            return user\n    return None\n",
    "def celsius_to_fahrenheit(celsius):\n    return celsius * 9 / 5 + 32\n\n\ndef fahrenheit_to_celsius(fahrenheit):"
    "\n    return (fahrenheit - 32) * 5 / 9\n",
    "def parse_version(text):\n    parts = text.split('.')\n    major = int(parts[0])\n    minor = int(parts[1]) if "
    "len(parts) > 1 else 0\n    patch = int(parts[2]) if len(parts) > 2 else 0\n    return (major, minor, patch)\n",
    "def summarize_orders(orders):\n    totals = {}\n    for order in orders:\n        customer = order['customer']\n"
    "        totals[customer] = totals.get(customer, 0) + order['amount']\n    return sorted(totals.items(), "
    "key=lambda kv: kv[1], reverse=True)\n",
    "def is_leap_year(year):\n    if year % 400 == 0:\n        return True\n    if year % 100 == 0:\n        return "
    "False\n    return year % 4 == 0\n",
    "def write_report(rows, path):\n    with open(path, 'w') as out:\n        out.write('name,score\\n')\n        "
    "for row in rows:\n            out.write(row['name'] + ',' + str(row['score']) + '\\n')\n",
    "def clamp(value, low, high):\n    if value < low:\n        return low\n    if value > high:\n        return high\n"
    "    return value\n",
    "def average_rating(reviews):\n    ratings = [r['stars'] for r in reviews if r.get('stars') is not None]\n"
    "    if not ratings:\n        return None\n    return sum(ratings) / len(ratings)\n",
    "def build_url(host, path, params):\n    url = 'https://' + host + '/' + path.lstrip('/')\n    if params:\n"
    "        query = '&'.join(k + '=' + str(v) for k, v in params.items())\n        url = url + '?' + query\n"
    "    return url\n",
    "def retry_request(session, url, attempts):\n    last_error = None\n    for attempt in range(attempts):\n"
    "        try:\n            return session.get(url, timeout=10)\n        except ConnectionError as error:\n"
    "            last_error = error\n    raise last_error\n",
    "def longest_word(sentence):\n    best = ''\n    for word in sentence.split():\n        if len(word) > len(best):"
    "\n            best = word\n    return best\n",
    "def split_name(full_name):\n    parts = full_name.strip().split()\n    first = parts[0]\n    last = parts[-1] if "
    "len(parts) > 1 else ''\n    return first, last\n",
    "def apply_discount(price, percent):\n    if percent < 0 or percent > 100:\n        raise ValueError('percent "
    "out of range')\n    return price * (100 - percent) / 100\n",
    "def read_numbers(path):\n    numbers = []\n    with open(path) as f:\n        for line in f:\n            line = "
    "line.strip()\n            if line:\n                numbers.append(float(line))\n    return numbers\n",
    "def histogram(values, bins):\n    low, high = min(values), max(values)\n    width = (high - low) / bins or 1\n"
    "    counts = [0] * bins\n    for v in values:\n        index = min(int((v - low) / width), bins - 1)\n"
    "        counts[index] += 1\n    return counts\n",
    "def greet(name, hour):\n    if hour < 12:\n        greeting = 'Good morning'\n    elif hour < 18:\n        "
    "greeting = 'Good afternoon'\n    else:\n        greeting = 'Good evening'\n    return greeting + ', ' + name\n",
    "def pick_winner(entries, seed):\n    import random\n    rng = random.Random(seed)\n    eligible = [e for e in "
    "entries if e['confirmed']]\n    return rng.choice(eligible)['name'] if eligible else None\n",
    "def format_duration(seconds):\n    minutes, seconds = divmod(int(seconds), 60)\n    hours, minutes = "
    "divmod(minutes, 60)\n    if hours:\n        return str(hours) + 'h ' + str(minutes) + 'm'\n    return "
    "str(minutes) + 'm ' + str(seconds) + 's'\n",
    "def common_prefix(words):\n    if not words:\n        return ''\n    prefix = words[0]\n    for word in "
    "words[1:]:\n        while not word.startswith(prefix):\n            prefix = prefix[:-1]\n    return prefix\n",
    "def to_table(rows, columns):\n    lines = [' | '.join(columns)]\n    for row in rows:\n        lines.append(' | "
    "'.join(str(row[c]) for c in columns))\n    return '\\n'.join(lines)\n",
    "def is_valid_password(password, min_length):\n    has_digit = any(c.isdigit() for c in password)\n    "
    "has_upper = any(c.isupper() for c in password)\n    return len(password) >= min_length and has_digit and "
    "has_upper\n",
)
EDITS = (
    "Rename the function `{name}` to `{new_name}`. Change nothing else.",
    "Add type hints to the parameters and the return value of `{name}`.",
    "Add a short docstring to `{name}`. Keep the code as it is.",
    "Rename the parameter `{param}` to `{new_param}` everywhere in `{name}`.",
    "Reindent this code with 2 spaces per level instead of 4.",
    "Add a comment above each `return` explaining what is returned.",
)


def _names(code: str) -> tuple[str, str]:
    """The first function's name and its first parameter."""
    match = re.match(r"def (\w+)\((\w+)", code)
    if match is None:
        raise ValueError(f"a snippet must start with a function of one parameter or more: {code[:40]!r}")
    return match.group(1), match.group(2)


def items() -> list[Item]:
    """Every snippet with several edits (rotating through EDITS), each prompt stating the code and the change;
    the snippet is the group."""
    found = []
    for i, code in enumerate(SNIPPETS):
        name, param = _names(code)
        for j in range(5):
            edit = EDITS[(i + j) % len(EDITS)].format(name=name, new_name=f"compute_{name}", param=param,
                                                      new_param=f"{param}_value")
            text = (f"{edit}\n\n```python\n{code}```" if j % 2 == 0 else f"```python\n{code}```\n\n{edit}")
            found.append((code, user(text, SYSTEM if j < 3 else None)))
    return found
