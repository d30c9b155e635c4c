"""The metric names a PromQL expression reads, so a test can check each against what the
targets really export (a dashboard that queries a removed name reads nothing, silently)."""

from __future__ import annotations

import re

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGES = re.compile(r"\[[^\[\]]*\]")
_LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_TOKEN = re.compile(r"\d[\w.]*|[A-Za-z_:][\w:]*(?=\s*(\()?)")
KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
                      "group_right", "inf", "nan", "start", "end"})


def metric_names(expr: str) -> frozenset[str]:
    """Names of the series an expression selects: identifiers that are not functions,
    aggregations, keywords, label names (in matchers or grouping lists) or numbers."""
    text = _LABEL_LISTS.sub(" ", _RANGES.sub(" ", _MATCHERS.sub(" ", _STRING.sub('""', expr))))
    names = set()
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if token[0].isdigit() or match.group(1) or token.lower() in KEYWORDS:
            continue
        names.add(token)
    return frozenset(names)
