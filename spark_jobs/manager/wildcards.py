"""Wildcard matching for classification rules and SAF-style profiles (pure)."""

from __future__ import annotations


def wildcard_match(pattern: str, text: str, any_one: str = "?") -> bool:
    """`*` matches any run of characters (also none), `any_one` exactly one; everything else literally.

    Linear time (greedy with one backtrack point), unlike a translated regular expression, which backtracks
    exponentially on patterns such as `*A*A*A*B`: rule values and attributes come from users."""
    p = t = 0
    star_p, star_t = -1, 0
    while t < len(text):
        if p < len(pattern) and (pattern[p] == any_one or pattern[p] == text[t]):
            p, t = p + 1, t + 1
        elif p < len(pattern) and pattern[p] == "*":
            star_p, star_t = p, t
            p += 1
        elif star_p >= 0:
            p, star_t = star_p + 1, star_t + 1
            t = star_t
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)
