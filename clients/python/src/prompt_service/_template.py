"""Local rendering, with the same rules as the service's template engine (packages/template).

``{{ name }}`` placeholders (name = ``[A-Za-z_][A-Za-z0-9_.-]*``, whitespace allowed inside the
braces; ``{{__proto__}}`` is text); anything else between braces is literal text. Values are
inserted once, never expanded again. Strings as they are, ``None`` as "", other values as
JavaScript writes them (``true``, ``3``, ``1.5``, ``{"a":1}``). Chat prompts: each message's
content is such a template, and a placeholder message is replaced by the list of
``{role, content}`` supplied under its name. The shared vectors in
``packages/template/vectors/render.json`` hold both engines to the same answers.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ._errors import PromptServiceError

# The whitespace set of JavaScript's \s, so that both engines agree on what a placeholder is.
_SPACES = frozenset(
    "\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff" + "".join(chr(c) for c in range(0x2000, 0x200B))
)
ROLES = ("system", "user", "assistant", "developer", "tool")

# A compiled template: the (literal before, name, placeholder as written) parts, and the tail.
Compiled = Tuple[Tuple[Tuple[str, str, str], ...], str]


def _name_start(c: str) -> bool:
    return ("A" <= c <= "Z") or ("a" <= c <= "z") or c == "_"


def _name_char(c: str) -> bool:
    return _name_start(c) or ("0" <= c <= "9") or c in ".-"


def compile_template(template: str) -> Compiled:
    """Parses once; a port of ``compileTemplate`` (a linear scan, not a regex)."""
    parts: List[Tuple[str, str, str]] = []
    length = len(template)
    literal_start = 0
    start = template.find("{{")
    while start != -1:
        i = start + 2
        while i < length and template[i] in _SPACES:
            i += 1
        name_start = i
        if i < length and _name_start(template[i]):
            i += 1
            while i < length and _name_char(template[i]):
                i += 1
            name_end = i
            while i < length and template[i] in _SPACES:
                i += 1
            name = template[name_start:name_end]
            if name != "__proto__" and template[i : i + 2] == "}}":
                end = i + 2
                parts.append((template[literal_start:start], name, template[start:end]))
                literal_start = end
                start = template.find("{{", end)
                continue
        # One character on, so that ``{{{a}}}`` still finds the inner ``{{a}}``.
        start = template.find("{{", start + 1)
    return tuple(parts), template[literal_start:]


def placeholders(template: str) -> List[str]:
    """Unique placeholder names in order of first appearance."""
    seen: Dict[str, None] = {}
    for _before, name, _raw in compile_template(template)[0]:
        seen.setdefault(name, None)
    return list(seen)


def _js_number(value: float) -> str:
    """A float as JavaScript's ``String(n)`` writes it (shortest round trip, JS's exponent rules)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    mantissa, _, exponent = text.partition("e")
    if not exponent:
        return text
    power = int(exponent)
    if -7 < power < 21:
        return format(Decimal(text), "f")
    return f"{mantissa}e{'+' if power > 0 else '-'}{abs(power)}"


def _to_json(value: Any) -> str:
    """``JSON.stringify`` of a JSON value: no spaces, numbers as JavaScript writes them."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _js_number(value) if math.isfinite(value) else "null"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{json.dumps(str(k), ensure_ascii=False)}:{_to_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_to_json(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def format_value(value: Any) -> str:
    """A supplied value as text, like the service's ``formatValue``."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _js_number(value)
    return _to_json(value)


def _declared(variables: Optional[Sequence[Mapping[str, Any]]]) -> Dict[str, Mapping[str, Any]]:
    declared: Dict[str, Mapping[str, Any]] = {}
    for variable in variables or []:
        declared.setdefault(str(variable["name"]), variable)
    return declared


def _missing(declared: Mapping[str, Mapping[str, Any]], values: Mapping[str, Any]) -> List[str]:
    # Required-ness is the declared contract, enforced even for a variable no longer used.
    return [name for name, v in declared.items() if v.get("required", True) and name not in values]


def _fill(compiled: Compiled, declared: Mapping[str, Mapping[str, Any]], values: Mapping[str, Any]) -> str:
    parts, tail = compiled
    out: List[str] = []
    for before, name, _raw in parts:
        out.append(before)
        if name in values:
            out.append(format_value(values[name]))
        else:
            default = declared.get(name, {}).get("defaultValue")
            out.append(default if isinstance(default, str) else "")
    out.append(tail)
    return "".join(out)


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
    declared = _declared(variables)
    return _fill(compile_template(template), declared, values), _missing(declared, values)


def _message_list(value: Any) -> Optional[List[Dict[str, str]]]:
    """A placeholder's value: a list of ``{role, content}`` with a known role and text content."""
    if not isinstance(value, list):
        return None
    out: List[Dict[str, str]] = []
    for item in value:
        if not isinstance(item, Mapping):
            return None
        role, content = item.get("role"), item.get("content")
        if not isinstance(role, str) or role not in ROLES or not isinstance(content, str):
            return None
        out.append({"role": role, "content": content})
    return out


class Renderable:
    """A published version parsed once, rendered as often as needed with ``invoke``'s rules."""

    def __init__(
        self,
        template: str,
        variables: Optional[Sequence[Mapping[str, Any]]],
        messages: Optional[Sequence[Mapping[str, Any]]] = None,
    ) -> None:
        self._declared = _declared(variables)
        self._chat: Optional[List[Union[Tuple[str, Compiled], str]]] = None
        if messages is not None:
            # A message is (role, compiled content); a placeholder is its name.
            self._chat = [
                str(m["name"]) if m.get("type") == "placeholder" else (str(m["role"]), compile_template(str(m["content"])))
                for m in messages
            ]
        self._compiled = compile_template(template)

    def render(self, values: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """``{"renderedContent", "renderedMessages"?}``; raises ``PromptServiceError`` (400)
        ``MISSING_REQUIRED_VARIABLES`` or ``VALIDATION_ERROR`` as invoke would."""
        values = values or {}
        missing = _missing(self._declared, values)
        if missing:
            raise PromptServiceError(
                400, "MISSING_REQUIRED_VARIABLES", f"missing required variables: {', '.join(missing)}", details=missing
            )
        if self._chat is None:
            return {"renderedContent": _fill(self._compiled, self._declared, values)}
        messages: List[Dict[str, str]] = []
        invalid: List[str] = []
        for entry in self._chat:
            if isinstance(entry, tuple):
                messages.append({"role": entry[0], "content": _fill(entry[1], self._declared, values)})
                continue
            if entry not in values:
                continue
            listed = _message_list(values[entry])
            if listed is None:
                if entry not in invalid:
                    invalid.append(entry)
                continue
            messages.extend(listed)
        if invalid:
            raise PromptServiceError(
                400,
                "VALIDATION_ERROR",
                f"not a list of {{role, content}} messages: {', '.join(invalid)}",
                details=[
                    {
                        "path": f"/body/variables/{name}",
                        "message": "must be an array of {role, content} with a known role and text content",
                    }
                    for name in invalid
                ],
            )
        content = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)
        return {"renderedContent": content, "renderedMessages": messages}
