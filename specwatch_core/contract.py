"""The step record's contract as one table (``FIELDS``), and the source of the two checkers built from it.

Each row names a field of StepRecord, its kind (what values it takes), the kind's arguments (Python
expressions over the record's fields and the validation limits ``max_lookahead``, ``max_domain_length``,
``earliest``, ``latest``), whether it may be absent (None), whether it is per position (absent from an
aggregate), and, for the aggregate fields, the value every per-step record has. Rows are in the order errors
are reported; a row's expressions use only fields of earlier rows.

``source()`` writes two functions from the table; records.py compiles them once at import, in its own
namespace (the ``_check_*`` helpers, ``_NUMBER``, ``_INT``, ``_mask``, the MAX_* bounds, read at call time):
- ``_check_fields``: field by field, raising RecordError with a message naming the first bad field;
- ``_plainly_valid``: the same checks as one chain of plain comparisons and C-level calls with no message
  built, for the hot ingest path. It only ever accepts what ``_check_fields`` accepts (a str subclass, say,
  goes to the field checks) and takes no record with the aggregate fields set.
``python -c "from specwatch_core import contract; print(contract.source())"`` prints them.
"""

from __future__ import annotations

from dataclasses import dataclass

FIELD_CHECKS = "_check_fields"
FAST_CHECK = "_plainly_valid"
LIMITS = ("max_lookahead", "max_domain_length", "earliest", "latest")


@dataclass(frozen=True)
class Kind:
    """How to check one kind of field: ``check`` a statement raising RecordError, ``fast`` a boolean
    expression true only where ``check`` passes (None: such a field never takes the fast path). In both,
    ``{v}`` is the field's value, ``{name}`` its quoted name, ``{0}``, ``{1}`` the row's arguments."""

    check: str
    fast: str | None


TEXT = Kind("_check_text({name}, {v}, {0})",  # (max length)
            "type({v}) is str and 0 < len({v}) <= {0} and {v}.isprintable()")
INT = Kind("_check_int({name}, {v}, {0}, {1})",  # (low, high)
           "type({v}) is int and {0} <= {v} <= {1}")
INT_TO_LIMIT = Kind(INT.check,  # (low, high or None: no upper bound)
                    "type({v}) is int and {0} <= {v} and ({1} is None or {v} <= {1})")
SECONDS = Kind("_check_seconds({name}, {v})", "type({v}) in _NUMBER and 0 <= {v} < MAX_STEP_SECONDS")
# Wall seconds of the steps, at least their split draft and verify time.
STEP_TIME = Kind("_check_step_time({name}, {v}, draft_seconds, verify_seconds)", None)
# (floor, low, high, ceiling): in [max(floor, low), min(high, ceiling)]. The fast path takes only a window
# [low, high] inside [floor, ceiling]: a chain of comparisons, where max() and min() are calls.
NUMBER_WITHIN = Kind("_check_number({name}, {v}, max({0}, {1}), min({2}, {3}))",
                     "type({v}) in _NUMBER and {0} <= {1} <= {v} <= {2} <= {3}")
MASK = Kind("_check_mask({name}, {v}, {0}, {1})",  # (length, leading ones)
            "type({v}) is list and {v} == (_MASKS.get(({0}, {1})) or _mask({0}, {1})) "
            "and _INT.issuperset(map(type, {v}))")
PROBABILITIES = Kind("_check_probabilities({name}, {v}, {0})",  # (length)
                     "type({v}) is list and len({v}) == {0} and (not {v} or _NUMBER.issuperset(map(type, {v})) "
                     "and math.isfinite(sum({v})) and 0.0 <= min({v}) and max({v}) <= 1.0)")

VARIES = object()  # ``Rule.plain`` of a field that is no aggregate field


@dataclass(frozen=True)
class Rule:
    """One row of the table: the field ``name`` is a ``kind`` with ``args`` (expressions, as text)."""

    name: str
    kind: Kind
    args: tuple[str, ...] = ()
    optional: bool = False  # may be None (absent)
    positions: bool = False  # a per-position list: absent from an aggregate, whose positions are unknown
    plain: object = VARIES  # an aggregate field: the value of a per-step record (the fast path takes no other)


def rule(name: str, kind: Kind, *args: str | int, optional: bool = False, positions: bool = False,
         plain: object = VARIES) -> Rule:
    return Rule(name, kind, tuple(str(a) for a in args), optional, positions, plain)


FIELDS = (
    rule("domain", TEXT, "max_domain_length"),
    rule("target_version", TEXT, 128),
    rule("draft_version", TEXT, 128),
    rule("lookahead", INT_TO_LIMIT, 0, "max_lookahead"),
    rule("steps", INT, 1, "MAX_STEPS", plain=1),
    rule("drafted", INT, 0, "lookahead * steps", optional=True, plain=None),
    rule("accepted", INT, 0, "lookahead * steps if drafted is None else drafted"),
    # Each verification pass yields its accepted tokens plus at most one bonus token.
    rule("emitted", INT, "steps", "accepted + steps"),
    rule("draft_seconds", SECONDS),
    rule("verify_seconds", SECONDS),
    rule("seconds", STEP_TIME, optional=True, plain=None),
    rule("pool", TEXT, 64, optional=True, plain=None),
    rule("prompt_seconds", SECONDS, optional=True, plain=None),
    rule("load", INT, 1, "MAX_LOAD", optional=True, plain=None),
    rule("timestamp", NUMBER_WITHIN, 0.0, "earliest", "latest", "MAX_TIMESTAMP", optional=True),
    rule("pod", TEXT, 128, optional=True),
    rule("request_id", TEXT, 128, optional=True),
    rule("accepted_mask", MASK, "lookahead", "accepted", optional=True, positions=True),
    rule("expected_acceptance", PROBABILITIES, "lookahead", optional=True, positions=True),
    rule("draft_confidence", PROBABILITIES, "lookahead", optional=True, positions=True),
)


def source(rules: tuple[Rule, ...] = FIELDS) -> str:
    """Python source of ``_check_fields`` and ``_plainly_valid``, each ``(record, *LIMITS)``."""
    return _field_checks(rules) + "\n\n" + _fast_check(rules)


def _field_checks(rules: tuple[Rule, ...]) -> str:
    lines = [_signature(FIELD_CHECKS), *_bind(rules)]
    for r in rules:
        body = ([f"_check_positions({r.name!r}, r)"] if r.positions else []) + [_fill(r.kind.check, r)]
        if r.optional:
            lines.append(f"    if {r.name} is not None:")
            lines += [f"        {line}" for line in body]
        else:
            lines += [f"    {line}" for line in body]
    return "\n".join(lines) + "\n"


def _fast_check(rules: tuple[Rule, ...]) -> str:
    aggregate = [r for r in rules if r.plain is not VARIES]
    others = [r for r in rules if r.plain is VARIES]
    return "\n".join([
        _signature(FAST_CHECK),
        *_bind(aggregate),
        f"    if not ({' and '.join(map(_is_plain, aggregate))}):",
        "        return False  # an aggregate: the field checks",
        *_bind(others),
        "    return (" + "\n            and ".join(map(_passes, others)) + ")",
    ]) + "\n"


def _is_plain(r: Rule) -> str:
    if r.plain is None:
        return f"{r.name} is None"
    return f"type({r.name}) is {type(r.plain).__name__} and {r.name} == {r.plain!r}"


def _passes(r: Rule) -> str:
    if r.kind.fast is None:
        raise ValueError(f"{r.name}: its kind has no fast check; give the row a plain value")
    term = _fill(r.kind.fast, r, grouped=True)
    return f"({r.name} is None or {term})" if r.optional else f"({term})"


def _signature(name: str) -> str:
    return f"def {name}(r, {', '.join(LIMITS)}):"


def _bind(rules: list[Rule] | tuple[Rule, ...]) -> list[str]:
    return [f"    {r.name} = r.{r.name}" for r in rules]


def _fill(template: str, r: Rule, grouped: bool = False) -> str:
    """``template`` for row ``r``; ``grouped``: each argument that is an expression (has a space) in
    parentheses (inside an expression, ``a if c else b`` would take the comparison with it)."""
    args = [f"({a})" if grouped and " " in a else a for a in r.args]
    return template.format(*args, v=r.name, name=repr(r.name))
