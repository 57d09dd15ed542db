"""Local rendering, with the same rules as the service's template engine (packages/template).

``{{ name }}`` placeholders (name = ``[A-Za-z_][A-Za-z0-9_.-]*``, whitespace allowed inside the
braces; ``{{__proto__}}`` is text); anything else between braces is literal text. Values are
inserted once, never expanded again. Strings as they are, ``None`` as "", other values as
JavaScript writes them (``true``, ``3``, ``1.5``, ``{"a":1}``). Logic as in packages/template's
logic.ts (DESIGN section 12): ``{{#if x}}…{{else}}…{{/if}}``, ``{{#unless x}}``,
``{{#each list}}…{{else}}…{{/each}}`` with ``{{this}}``, ``{{this.field}}`` and ``{{@index}}``,
Handlebars' truthiness; a template whose blocks do not parse renders flat (an old version).
References to other prompts (``{{> slug}}``) are resolved by the service only: such a version
is refused here (``REFERENCES_NOT_LOCAL``) and the client asks invoke instead. Chat prompts:
each message's content is a template of its own (logic and references as above), and a placeholder message is replaced by the list of
``{role, content}`` supplied under its name. The rendered text is capped as the service caps it
(``RENDER_MAX_OUTPUT_BYTES``, 1 MiB by default: 422 ``RENDER_TOO_LARGE``). The shared vectors
in ``packages/template/vectors/render.json`` hold both engines to the same answers.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ._errors import PromptServiceError

# The whitespace set of JavaScript's \s, so that both engines agree on what a placeholder is.
_SPACES = frozenset(
    "\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff" + "".join(chr(c) for c in range(0x2000, 0x200B))
)
ROLES = ("system", "user", "assistant", "developer", "tool")
#: The render service's default output cap (RENDER_MAX_OUTPUT_BYTES): 1 MiB of UTF-8.
DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024
#: Most template nodes evaluated in one rendering (loops in loops that write nothing), as the service.
DEFAULT_MAX_STEPS = 2_000_000
#: How deep blocks may nest (the service's MAX_BLOCK_DEPTH): deeper is a syntax error there.
MAX_BLOCK_DEPTH = 64

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
    """A double as JavaScript's ``Number#toString`` writes it: the shortest digits that round
    trip (``repr``'s, the same digits), placed by ECMA-262's rules (Number::toString)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"  # -0 too
    if value < 0:
        return "-" + _js_number(-value)
    _sign, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    exponent = int(exponent) + len(digit_tuple) - len(digits)
    k = len(digits)
    n = k + exponent  # the value is 0.digits × 10^n
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return f"{digits[:n]}.{digits[n:]}"
    if -6 < n <= 0:
        return f"0.{'0' * -n}{digits}"
    power = n - 1
    mantissa = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
    return f"{mantissa}e{'+' if power > 0 else '-'}{abs(power)}"


def _as_double(value: int) -> float:
    """A JSON integer as JavaScript holds it: a double (rounded past 2^53, infinite past ~1.8e308)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


# A lone surrogate (a JSON escape the text carried): JSON.stringify writes it as \udxxx.
_LONE_SURROGATE = re.compile("[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")


def _json_string(text: str) -> str:
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(text, ensure_ascii=False))


def _array_index(key: str) -> bool:
    # An array index (a canonical integer below 2^32 - 1): JavaScript lists such keys first.
    return key.isdigit() and key.isascii() and (key == "0" or key[0] != "0") and int(key) < 2**32 - 1


def _to_json(value: Any) -> str:
    """``JSON.stringify`` of a JSON value: no spaces, numbers as JavaScript writes them, an
    object's keys in JavaScript's order (array indices ascending, then the rest as inserted)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        value = _as_double(value)
    if isinstance(value, float):
        return _js_number(value) if math.isfinite(value) else "null"
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, Mapping):
        keys = [str(k) for k in value]
        indices = sorted((k for k in keys if _array_index(k)), key=int)
        ordered = indices + [k for k in keys if not _array_index(k)]
        items = {str(k): v for k, v in value.items()}
        return "{" + ",".join(f"{_json_string(k)}:{_to_json(items[k])}" for k in ordered) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_to_json(v) for v in value) + "]"
    return _json_string(str(value))


def format_value(value: Any) -> str:
    """A supplied value as text, like the service's ``formatValue``."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return _js_number(_as_double(value))
    if isinstance(value, float):
        return _js_number(value)
    return _to_json(value)


def utf8_length(text: str) -> int:
    """Size in UTF-8, a lone surrogate (from a JSON escape) counting as 3 bytes as in the service."""
    return len(text.encode("utf-8", "surrogatepass"))


def _too_large(max_bytes: int) -> PromptServiceError:
    return PromptServiceError(
        422,
        "RENDER_TOO_LARGE",
        f"the rendered text would exceed {max_bytes} bytes",
        details={"maxOutputBytes": max_bytes},
    )


def _too_many_steps(max_steps: int) -> PromptServiceError:
    return PromptServiceError(
        422,
        "RENDER_TOO_LARGE",
        f"the template takes more than {max_steps} steps to render",
        details={"maxSteps": max_steps},
    )


def _declared(variables: Optional[Sequence[Mapping[str, Any]]]) -> Dict[str, Mapping[str, Any]]:
    declared: Dict[str, Mapping[str, Any]] = {}
    for variable in variables or []:
        declared.setdefault(str(variable["name"]), variable)
    return declared


def _missing(declared: Mapping[str, Mapping[str, Any]], values: Mapping[str, Any]) -> List[str]:
    # Required-ness is the declared contract, enforced even for a variable no longer used.
    return [name for name, v in declared.items() if v.get("required", True) and name not in values]


def _text_of(name: str, declared: Mapping[str, Mapping[str, Any]], values: Mapping[str, Any]) -> str:
    """A placeholder's text at invoke: the value, else the declared default, else ""."""
    if name in values:
        return format_value(values[name])
    default = declared.get(name, {}).get("defaultValue")
    return default if isinstance(default, str) else ""


def _fill(
    compiled: Compiled, declared: Mapping[str, Mapping[str, Any]], values: Mapping[str, Any], max_bytes: int
) -> str:
    parts, tail = compiled
    out: List[str] = []
    size = utf8_length(tail)
    for before, name, _raw in parts:
        text = _text_of(name, declared, values)
        size += utf8_length(before) + utf8_length(text)
        if size > max_bytes:
            # Counted before anything is joined, as the service does.
            raise _too_large(max_bytes)
        out.append(before)
        out.append(text)
    if size > max_bytes:
        raise _too_large(max_bytes)
    out.append(tail)
    return "".join(out)


# ---- logic: a port of packages/template/src/logic.ts

_BLOCKS = ("if", "unless", "each")
_SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_SLUG_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_SELECTOR_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_VERSION = re.compile(r"^v[1-9][0-9]{0,9}$")
_VERSION_MAX = 1_000_000_000

# A node is a tuple whose first item is its kind:
#   ("text", text) ("var", name) ("item", path) ("index",) ("include", key)
#   ("if", negate, ref, body, otherwise) ("each", ref, body, otherwise)
# and a block's operand (ref) is ("var", name) | ("item", path) | ("index",).
Node = Tuple[Any, ...]


class TemplateSyntaxError(ValueError):
    """The template's blocks do not parse (the service refuses such a draft; an old version renders flat)."""


def _scan_name(s: str, i: int) -> int:
    if i >= len(s) or not _name_start(s[i]):
        return -1
    i += 1
    while i < len(s) and _name_char(s[i]):
        i += 1
    return i


def _skip_space(s: str, i: int) -> int:
    while i < len(s) and s[i] in _SPACES:
        i += 1
    return i


def _read_operand(s: str, i: int) -> str:
    if s.startswith("@index", i) and not (i + 6 < len(s) and _name_char(s[i + 6])):
        return "@index"
    end = _scan_name(s, i)
    return "" if end == -1 else s[i:end]


def _operand(word: str, each_depth: int) -> Node:
    # As the service: no JSON body can carry the key, so such a block could never be satisfied.
    if word == "__proto__":
        raise TemplateSyntaxError("__proto__ cannot be a variable (no request can supply it)")
    if word == "@index":
        if each_depth == 0:
            raise TemplateSyntaxError("{{@index}} is only defined inside {{#each}}")
        return ("index",)
    if each_depth > 0 and (word == "this" or word.startswith("this.")):
        path = tuple() if word == "this" else tuple(word[5:].split("."))
        if any(p == "" for p in path):
            raise TemplateSyntaxError(f"bad field path {word}")
        return ("item", path)
    return ("var", word)


class _Frame:
    def __init__(self, kind: str, test: Node) -> None:
        self.kind = kind
        self.test = test
        self.yes: List[Node] = []
        self.otherwise: List[Node] = []
        self.in_else = False


def compile_logic(source: str) -> Optional[Tuple[List[Node], List[str]]]:
    """Parses blocks and references: ``(nodes, reference keys)``, or None for a template
    without either (it renders flat). Raises TemplateSyntaxError."""
    root: List[Node] = []
    stack: List[_Frame] = []
    includes: List[str] = []
    logic = False
    literal_start = 0

    def out() -> List[Node]:
        if not stack:
            return root
        top = stack[-1]
        return top.otherwise if top.in_else else top.yes

    def each_depth() -> int:
        return sum(1 for f in stack if f.kind == "each")

    def flush(end: int) -> None:
        if end > literal_start:
            out().append(("text", source[literal_start:end]))

    start = source.find("{{")
    while start != -1:
        i = _skip_space(source, start + 2)
        c = source[i : i + 1]
        if c == "#":
            kw_end = _scan_name(source, i + 1)
            kw = "" if kw_end == -1 else source[i + 1 : kw_end]
            if kw not in _BLOCKS:
                raise TemplateSyntaxError(f"unknown block {{{{#{kw}}}}}")
            j = _skip_space(source, kw_end)
            word = _read_operand(source, j)
            if not word:
                raise TemplateSyntaxError(f"{{{{#{kw}}}}} needs a variable name")
            j = _skip_space(source, j + len(word))
            if source[j : j + 2] != "}}":
                raise TemplateSyntaxError(f"{{{{#{kw} {word}}}}} is not closed by }}}}")
            if len(stack) >= MAX_BLOCK_DEPTH:
                raise TemplateSyntaxError(f"blocks nest deeper than {MAX_BLOCK_DEPTH} levels")
            test = _operand(word, each_depth())
            if kw == "each" and test[0] == "index":
                raise TemplateSyntaxError("{{#each}} needs a list, not @index")
            flush(start)
            stack.append(_Frame(kw, test))
            logic = True
            literal_start = j + 2
            start = source.find("{{", literal_start)
            continue
        if c == "/":
            kw_end = _scan_name(source, i + 1)
            kw = "" if kw_end == -1 else source[i + 1 : kw_end]
            j = i + 1 if kw_end == -1 else _skip_space(source, kw_end)
            if source[j : j + 2] != "}}" or kw not in _BLOCKS:
                raise TemplateSyntaxError(f"unknown closing tag {{{{/{kw}}}}}")
            if not stack:
                raise TemplateSyntaxError(f"{{{{/{kw}}}}} closes no open block")
            if stack[-1].kind != kw:
                raise TemplateSyntaxError(f"{{{{/{kw}}}}} closes {{{{#{stack[-1].kind}}}}}")
            flush(start)
            frame = stack.pop()
            node: Node = (
                ("each", frame.test, frame.yes, frame.otherwise)
                if frame.kind == "each"
                else ("if", frame.kind == "unless", frame.test, frame.yes, frame.otherwise)
            )
            out().append(node)
            literal_start = j + 2
            start = source.find("{{", literal_start)
            continue
        if c == ">":
            j = _skip_space(source, i + 1)
            slug_start = j
            while j < len(source) and source[j] in _SLUG_CHARS:
                j += 1
            slug = source[slug_start:j]
            key = slug
            if source[j : j + 1] == "@":
                j += 1
                sel_start = j
                while j < len(source) and source[j] in _SELECTOR_CHARS:
                    j += 1
                sel = source[sel_start:j]
                if not (
                    sel in ("preview", "production")
                    or (_VERSION.match(sel) is not None and int(sel[1:]) <= _VERSION_MAX)
                ):
                    raise TemplateSyntaxError(f"bad reference selector @{sel}")
                key = f"{slug}@{sel}"
            j = _skip_space(source, j)
            if not _SLUG.match(slug) or len(slug) > 100 or source[j : j + 2] != "}}":
                raise TemplateSyntaxError("bad reference: use {{> slug}}, {{> slug@production}} or {{> slug@v3}}")
            flush(start)
            if key not in includes:
                includes.append(key)
            out().append(("include", key))
            logic = True
            literal_start = j + 2
            start = source.find("{{", literal_start)
            continue
        if c == "@":
            word = _read_operand(source, i)
            j = _skip_space(source, i + len(word))
            if word == "@index" and source[j : j + 2] == "}}":
                _operand(word, each_depth())
                flush(start)
                out().append(("index",))
                logic = True
                literal_start = j + 2
                start = source.find("{{", literal_start)
                continue
        name_end = _scan_name(source, i)
        if name_end != -1:
            name = source[i:name_end]
            j = _skip_space(source, name_end)
            if name != "__proto__" and source[j : j + 2] == "}}":
                if name == "else":
                    if not stack:
                        raise TemplateSyntaxError("{{else}} outside a block")
                    if stack[-1].in_else:
                        raise TemplateSyntaxError(f"a second {{{{else}}}} in {{{{#{stack[-1].kind}}}}}")
                    flush(start)
                    stack[-1].in_else = True
                    logic = True
                    literal_start = j + 2
                    start = source.find("{{", literal_start)
                    continue
                ref = _operand(name, each_depth())
                flush(start)
                if ref[0] == "item":
                    out().append(ref)
                    logic = True
                else:
                    out().append(("var", name))
                literal_start = j + 2
                start = source.find("{{", literal_start)
                continue
        # Not a tag: literal text. One character on, as the flat scanner.
        start = source.find("{{", start + 1)
    if stack:
        raise TemplateSyntaxError(f"{{{{#{stack[-1].kind}}}}} is never closed")
    if not logic:
        return None
    flush(len(source))
    return root, includes


def truthy(value: Any) -> bool:
    """Handlebars' truthiness: false, null, missing, "", 0, NaN and [] are false; {} is true."""
    if value is None or value is False:
        return False
    if isinstance(value, (list, tuple)):
        return len(value) > 0
    if isinstance(value, Mapping):
        return True
    if isinstance(value, float):
        return value != 0 and not math.isnan(value)
    if isinstance(value, (int, str)):
        return bool(value)
    return True


def _field(value: Any, key: str) -> Any:
    """An own property of a JSON value, as JavaScript's ``Object.hasOwn`` sees it (else _ABSENT)."""
    if isinstance(value, Mapping):
        return value[key] if key in value else _ABSENT
    if isinstance(value, (list, tuple)):
        if key == "length":
            return len(value)
        if key.isdigit() and (key == "0" or not key.startswith("0")) and int(key) < len(value):
            return value[int(key)]
    return _ABSENT


_ABSENT = object()


def _not_a_list(ref: Node) -> PromptServiceError:
    if ref[0] == "var":
        name, path = ref[1], f"/body/variables/{ref[1]}"
    else:
        name, path = ".".join(("this",) + tuple(ref[1])) if ref[0] == "item" else "@index", "/body/variables"
    return PromptServiceError(
        400,
        "VALIDATION_ERROR",
        f"{{{{#each {name}}}}} needs a list",
        details=[{"path": path, "message": f"{name} must be an array"}],
    )


def _render_logic(
    nodes: List[Node],
    declared: Mapping[str, Mapping[str, Any]],
    values: Mapping[str, Any],
    max_bytes: int,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> Tuple[str, int]:
    """The rendering and the steps it took (a chat rendering shares one budget over its messages)."""
    out: List[str] = []
    size = 0
    steps = 0
    scopes: List[Tuple[Any, int]] = []

    def append(text: str) -> None:
        nonlocal size
        size += utf8_length(text)
        if size > max_bytes:
            raise _too_large(max_bytes)
        out.append(text)

    def root(name: str) -> Any:
        if name in values:
            return values[name]
        default = declared.get(name, {}).get("defaultValue")
        return default if default is not None else _ABSENT

    def item(path: Sequence[str]) -> Any:
        value: Any = scopes[-1][0] if scopes else _ABSENT
        for key in path:
            value = _field(value, key)
            if value is _ABSENT:
                return _ABSENT
        return value

    def ref_value(ref: Node) -> Any:
        if ref[0] == "var":
            return root(ref[1])
        if ref[0] == "item":
            return item(ref[1])
        return scopes[-1][1] if scopes else _ABSENT

    def walk(children: List[Node]) -> None:
        nonlocal steps
        for node in children:
            steps += 1
            if steps > max_steps:
                raise _too_many_steps(max_steps)
            kind = node[0]
            if kind == "text":
                append(node[1])
            elif kind in ("var", "item"):
                value = root(node[1]) if kind == "var" else item(node[1])
                if value is not _ABSENT:
                    append(format_value(value))
            elif kind == "index":
                append(str(scopes[-1][1]) if scopes else "")
            elif kind == "if":
                value = ref_value(node[2])
                yes = (value is not _ABSENT and truthy(value)) != node[1]
                walk(node[3] if yes else node[4])
            elif kind == "each":
                listed = ref_value(node[1])
                if listed is _ABSENT or listed is None or listed is False:
                    walk(node[3])
                    continue
                if not isinstance(listed, (list, tuple)):
                    raise _not_a_list(node[1])
                if not listed:
                    walk(node[3])
                    continue
                for index, entry in enumerate(listed):
                    steps += 1
                    if steps > max_steps:
                        raise _too_many_steps(max_steps)
                    scopes.append((entry, index))
                    walk(node[2])
                    scopes.pop()
            # "include" never reaches here: such a version is refused before rendering.

    walk(nodes)
    return "".join(out), steps


def render(
    template: str,
    variables: Optional[Sequence[Mapping[str, Any]]],
    values: Mapping[str, Any],
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
) -> Tuple[str, List[str]]:
    """Renders like the service's ``invoke``: answers the text and the missing required names.

    Without declared ``variables`` every placeholder is optional (rendered as "" when absent);
    declared ones are required unless they say ``"required": False``, and may carry a
    ``defaultValue``. Raises ``PromptServiceError`` as invoke refuses (RENDER_TOO_LARGE, an
    ``#each`` over a value that is not a list, REFERENCES_NOT_LOCAL).
    """
    local = Renderable(template, variables, max_output_bytes=max_output_bytes)
    return local.text(values), _missing(local._declared, values)  # noqa: SLF001 - same module


def variable_names(template: str) -> List[str]:
    """Root variable names a template uses (placeholders and block operands) in order of first
    appearance: the logic grammar's when it has logic, the flat scanner's otherwise."""
    nodes, _keys = _logic_of(template)
    if nodes is None:
        return placeholders(template)
    seen: Dict[str, None] = {}

    def walk(children: List[Node]) -> None:
        for node in children:
            if node[0] == "var":
                seen.setdefault(node[1], None)
            elif node[0] == "if":
                if node[2][0] == "var":
                    seen.setdefault(node[2][1], None)
                walk(node[3])
                walk(node[4])
            elif node[0] == "each":
                if node[1][0] == "var":
                    seen.setdefault(node[1][1], None)
                walk(node[2])
                walk(node[3])

    walk(nodes)
    return list(seen)


def sync_variables(template: str, declared: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """The service's ``syncVariables``: the declared variables (required unless they say
    otherwise; the first of a name wins), then the template's undeclared names, required."""
    out: Dict[str, Dict[str, Any]] = {}
    for given in declared:
        name = str(given["name"])
        if name in out:
            continue
        variable: Dict[str, Any] = {"name": name, "required": given.get("required", True) is not False}
        for extra in ("description", "defaultValue"):
            if given.get(extra) is not None:
                variable[extra] = given[extra]
        out[name] = variable
    for name in variable_names(template):
        out.setdefault(name, {"name": name, "required": True})
    return list(out.values())


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


def _logic_of(source: str) -> Tuple[Optional[List[Node]], List[str]]:
    """A template's logic and reference keys; (None, []) when its blocks do not parse (an old
    version renders flat, as before)."""
    try:
        parsed = compile_logic(source)
    except TemplateSyntaxError:
        parsed = None
    return parsed if parsed is not None else (None, [])


class Renderable:
    """A published version parsed once, rendered as often as needed with ``invoke``'s rules."""

    def __init__(
        self,
        template: str,
        variables: Optional[Sequence[Mapping[str, Any]]],
        messages: Optional[Sequence[Mapping[str, Any]]] = None,
        *,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        max_steps: int = DEFAULT_MAX_STEPS,
    ) -> None:
        self._declared = _declared(variables)
        self._max = max_output_bytes
        self._max_steps = max_steps
        # A message is (role, compiled content, its logic or None); a placeholder is its name.
        self._chat: Optional[List[Union[Tuple[str, Compiled, Optional[List[Node]]], str]]] = None
        self._logic: Optional[List[Node]] = None
        #: The reference keys (``slug``, ``slug@production``) of a version that includes other prompts.
        self.references: List[str] = []
        if messages is not None:
            self._chat = []
            for m in messages:
                if m.get("type") == "placeholder":
                    self._chat.append(str(m["name"]))
                    continue
                content = str(m["content"])
                logic, keys = _logic_of(content)
                self._chat.append((str(m["role"]), compile_template(content), logic))
                self.references.extend(k for k in keys if k not in self.references)
        else:
            self._logic, self.references = _logic_of(template)
        self._compiled = compile_template(template)

    def _refuse_references(self) -> None:
        if self.references:
            raise PromptServiceError(
                400,
                "REFERENCES_NOT_LOCAL",
                "this version includes other prompts ({{> slug}}), which the service resolves: "
                "render it with invoke (the client's render_locally does so by itself)",
                details=list(self.references),
            )

    def text(self, values: Mapping[str, Any]) -> str:
        """A text prompt's rendering, without the required-variable check."""
        self._refuse_references()
        if self._logic is not None:
            return _render_logic(self._logic, self._declared, values, self._max, self._max_steps)[0]
        return _fill(self._compiled, self._declared, values, self._max)

    def render(self, values: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """``{"renderedContent", "renderedMessages"?}``; raises ``PromptServiceError`` as invoke
        would: 400 ``MISSING_REQUIRED_VARIABLES`` or ``VALIDATION_ERROR``, 422
        ``RENDER_TOO_LARGE``. A rendering error comes before the missing variables, as there."""
        values = values or {}
        self._refuse_references()
        if self._chat is None:
            content = self.text(values)
            self._refuse_missing(values)
            return {"renderedContent": content}
        messages: List[Dict[str, str]] = []
        invalid: List[str] = []
        size = 0
        # One budget of steps for the whole rendering, as the service's renderChat.
        steps_left = self._max_steps

        def grow(entry: Dict[str, str]) -> None:
            nonlocal size
            # "[role]\n" + content, and "\n\n" between blocks: the size of renderedContent.
            size += utf8_length(entry["role"]) + utf8_length(entry["content"]) + 3 + (2 if messages else 0)
            if size > self._max:
                raise _too_large(self._max)
            messages.append(entry)

        for entry in self._chat:
            if isinstance(entry, tuple):
                role, compiled, logic = entry
                if logic is not None:
                    content, steps = _render_logic(logic, self._declared, values, self._max, steps_left)
                    steps_left -= steps
                else:
                    content = _fill(compiled, self._declared, values, self._max)
                grow({"role": role, "content": content})
                continue
            if entry not in values:
                continue
            listed = _message_list(values[entry])
            if listed is None:
                if entry not in invalid:
                    invalid.append(entry)
                continue
            for message in listed:
                grow(message)
        self._refuse_missing(values)
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

    def _refuse_missing(self, values: Mapping[str, Any]) -> None:
        missing = _missing(self._declared, values)
        if missing:
            raise PromptServiceError(
                400, "MISSING_REQUIRED_VARIABLES", f"missing required variables: {', '.join(missing)}", details=missing
            )
