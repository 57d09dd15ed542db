"""Local rendering of fallback templates, the same rules as the service's template engine.

``{{ name }}`` placeholders (name = ``[A-Za-z_][A-Za-z0-9_.-]*``, whitespace allowed inside the
braces); anything else between braces is literal text. Values are inserted once, never expanded
again. Strings as they are, ``None`` as "", other values as JSON (``true``, ``3``, ``{"a":1}``).
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

# The whitespace set of JavaScript's \s, so that both engines agree on what a placeholder is.
_WS = "[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]*"
_PLACEHOLDER = re.compile(r"\{\{" + _WS + r"([A-Za-z_][A-Za-z0-9_.\-]*)" + _WS + r"\}\}")


def placeholders(template: str) -> List[str]:
    """Unique placeholder names in order of first appearance."""
    seen: Dict[str, None] = {}
    for match in _PLACEHOLDER.finditer(template):
        seen.setdefault(match.group(1), None)
    return list(seen)


def format_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def render(
    template: str,
    variables: Optional[Sequence[Mapping[str, Any]]],
    values: Mapping[str, Any],
) -> Tuple[str, List[str]]:
    """Renders like the service's ``invoke``: answers the text and the missing required names.

    Without declared ``variables`` every placeholder is optional (rendered as "" when absent);
    declared ones are required unless they say ``"required": False``, and may carry a
    ``defaultValue``.
    """
    declared: Dict[str, Mapping[str, Any]] = {}
    for variable in variables or []:
        declared.setdefault(str(variable["name"]), variable)
    missing = [
        name
        for name, variable in declared.items()
        if variable.get("required", True) and name not in values
    ]

    def replace(match: "re.Match[str]") -> str:
        name = match.group(1)
        if name in values:
            return format_value(values[name])
        default = declared.get(name, {}).get("defaultValue")
        return default if isinstance(default, str) else ""

    return _PLACEHOLDER.sub(replace, template), missing
