"""Operator commands as typed at a console, and the structured VARY request body (pure).

Grammar, case-insensitive; blanks are allowed around `,` and `=`, as operators type them (`VARY WLM, DYNAPPL=X,QUIESCE`):

    VARY | V        WLM,APPLENV=name,action          action: QUIESCE | Q | RESUME | REFRESH
                    WLM,DYNAPPL=name,action
    DISPLAY | D     WLM,APPLENV=name-or-pattern      pattern: `*` for any run of characters (`*` alone: all)
                    WLM,DYNAPPL=name-or-pattern

DYNAPPL= names a dynamic application environment (one a queue manager defined with IWM4AEDF) rather than one of the
service definition. Names follow app.schemas.Name and come back in upper case.

A command that does not parse raises ValidationFailed (422) with one entry at path `command` that adds where and what:
`reason` (a Refusal), `token` (the offending text as typed, '' when something is missing at the end) and `column`
(1-based, in the text as sent, where `token` starts or the missing part belongs).

A VARY request body (VaryBody) is either `{"command": "VARY WLM,..."}` or the structured form VaryRequest. The presence
of `command` selects the text form, so a client gets the errors of the form it meant rather than of both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, get_args

from pydantic import BeforeValidator, Discriminator, Field, StrictBool, StringConstraints, Tag, TypeAdapter, ValidationError

from app.errors import ValidationFailed, pydantic_errors
from app.shared.schemas import Name, StrictModel
from spark_jobs.manager.wildcards import wildcard_match

# Generous: the longest valid command with blanks around every separator is well under it.
COMMAND_MAX_LENGTH = 256


class Action(StrEnum):
    QUIESCE = "QUIESCE"
    RESUME = "RESUME"
    REFRESH = "REFRESH"


class Refusal(StrEnum):
    """Why a command did not parse: the `reason` of its 422 entry."""

    EMPTY = "empty"
    UNKNOWN_VERB = "unknown_verb"
    MISSING_WLM = "missing_wlm"
    MISSING_COMMA = "missing_comma"
    MISSING_APPLICATION_ENVIRONMENT = "missing_application_environment"
    MISSING_EQUALS = "missing_equals"
    BAD_NAME = "bad_name"
    MISSING_ACTION = "missing_action"
    UNKNOWN_ACTION = "unknown_action"
    EXTRA_OPERAND = "extra_operand"


@dataclass(frozen=True)
class VaryCommand:
    action: Action
    application_environment: str
    dynamic: bool

    def __str__(self) -> str:
        """The canonical spelling, for audit records and replies: `VARY WLM,APPLENV=PAYROLL,QUIESCE`."""
        return f"VARY WLM,{_keyword(self.dynamic)}={self.application_environment},{self.action}"


@dataclass(frozen=True)
class DisplayCommand:
    pattern: str
    dynamic: bool

    def matches(self, name: str) -> bool:
        return wildcard_match(self.pattern, name.upper())


def parse_command(command: str) -> VaryCommand | DisplayCommand:
    """Either command, by its verb."""
    reader = _Reader(command)
    if reader.verb((_VARY, _DISPLAY)) == _VARY:
        return _vary_operands(reader)
    return _display_operands(reader)


def parse_vary(command: str) -> VaryCommand:
    reader = _Reader(command)
    reader.verb((_VARY,))
    return _vary_operands(reader)


def _vary_operands(reader: _Reader) -> VaryCommand:
    dynamic, name = reader.application_environment(patterns=False)
    action = reader.action()
    reader.end()
    return VaryCommand(action, name, dynamic)


def _display_operands(reader: _Reader) -> DisplayCommand:
    dynamic, pattern = reader.application_environment(patterns=True)
    reader.end()
    return DisplayCommand(pattern, dynamic)


# ---------------------------------------------------------------------------------------------------------------------
# The reader
# ---------------------------------------------------------------------------------------------------------------------

_VARY, _DISPLAY = "VARY", "DISPLAY"
_VERBS = {"VARY": _VARY, "V": _VARY, "DISPLAY": _DISPLAY, "D": _DISPLAY}
_VERB_SPELLINGS = {_VARY: "VARY (or V)", _DISPLAY: "DISPLAY (or D)"}
_KEYWORD_IS_DYNAMIC = {"APPLENV": False, "DYNAPPL": True}
# Q is z/OS's own abbreviation of QUIESCE; RESUME and REFRESH have none.
_ACTIONS = {"QUIESCE": Action.QUIESCE, "Q": Action.QUIESCE, "RESUME": Action.RESUME, "REFRESH": Action.REFRESH}
_ACTION_CHOICES = "QUIESCE (or Q), RESUME or REFRESH"

# A blank is what Python's `\s` and str.strip (Name's strip_whitespace) take for one, spelled out: the OpenAPI
# document's (ECMA-262) `\s` differs from Python's, and COMMAND_PATTERN must accept exactly what the reader does.
_BLANKS = r"\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_BLANK = f"[{_BLANKS}]"
# A word is anything up to a blank or a separator, so a bad character lands inside a word and is reported as such.
_TOKEN = re.compile(f"[^{_BLANKS},=]+|[,=]")
_SEPARATORS = (",", "=")

# The one definition of a valid name is app.schemas.Name; its constraints are read from there.
_NAME_RULES = next(rule for rule in get_args(Name) if isinstance(rule, StringConstraints))
_NAME_PATTERN = re.compile(str(_NAME_RULES.pattern))
_NAME_MAX_LENGTH = int(_NAME_RULES.max_length or 0)
# Stands in for `*` when a pattern is checked against the name rules: valid at any position of a name.
_WILDCARD_STAND_IN = "A"


@dataclass(frozen=True)
class _Token:
    text: str
    column: int


class _Reader:
    """Takes the tokens of one command in grammar order; a step that finds something else refuses, saying what it
    expected, at which column, and what it found."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.tokens = [_Token(match.group(), match.start() + 1) for match in _TOKEN.finditer(command)]
        self.position = 0

    def verb(self, accepted: Sequence[str]) -> str:
        """The verb (one of `accepted`) and the WLM after it."""
        token = self._take()
        if token is None:
            raise _refusal(Refusal.EMPTY, "the command is empty", "", 1)
        verb = _VERBS.get(_keyword_of(token))
        if verb is None or verb not in accepted:
            raise self._expected(Refusal.UNKNOWN_VERB, " or ".join(_VERB_SPELLINGS[each] for each in accepted), token)
        wlm = self._take()
        if wlm is None or _keyword_of(wlm) != "WLM":
            raise self._expected(Refusal.MISSING_WLM, f"WLM after {token.text.upper()}", wlm)
        return verb

    def application_environment(self, *, patterns: bool) -> tuple[bool, str]:
        """`,APPLENV=name` or `,DYNAPPL=name`: whether it is dynamic, and the name (or pattern) in upper case."""
        comma = self._take()
        if comma is None:
            raise self._expected(Refusal.MISSING_APPLICATION_ENVIRONMENT, "',APPLENV=name' or ',DYNAPPL=name'", None)
        if comma.text != ",":
            raise self._expected(Refusal.MISSING_COMMA, "','", comma)
        keyword = self._take()
        dynamic = _KEYWORD_IS_DYNAMIC.get(_keyword_of(keyword)) if keyword else None
        if keyword is None or dynamic is None:
            raise self._expected(Refusal.MISSING_APPLICATION_ENVIRONMENT, "APPLENV= or DYNAPPL=", keyword)
        equals = self._take()
        if equals is None or equals.text != "=":
            raise self._expected(Refusal.MISSING_EQUALS, f"'=' after {keyword.text.upper()}", equals)
        name = self._take()
        if name is None or name.text in _SEPARATORS:
            what = "an application environment name or pattern" if patterns else "an application environment name"
            raise self._expected(Refusal.BAD_NAME, what, name)
        _check_name(name, patterns=patterns)
        return dynamic, name.text.upper()

    def action(self) -> Action:
        comma = self._take()
        if comma is None:
            raise self._expected(Refusal.MISSING_ACTION, f"',' and {_ACTION_CHOICES}", None)
        if comma.text != ",":
            raise self._expected(Refusal.MISSING_COMMA, "','", comma)
        word = self._take()
        if word is None or word.text in _SEPARATORS:
            raise self._expected(Refusal.MISSING_ACTION, _ACTION_CHOICES, word)
        action = _ACTIONS.get(_keyword_of(word))
        if action is None:
            raise self._expected(Refusal.UNKNOWN_ACTION, _ACTION_CHOICES, word)
        return action

    def end(self) -> None:
        extra = self._take()
        if extra is not None:
            rest = self.command[extra.column - 1 :].rstrip()
            raise _refusal(
                Refusal.EXTRA_OPERAND,
                f"unexpected {rest!r} at column {extra.column}: the command is complete before it",
                rest,
                extra.column,
            )

    def _take(self) -> _Token | None:
        if self.position == len(self.tokens):
            return None
        self.position += 1
        return self.tokens[self.position - 1]

    def _expected(self, reason: Refusal, expected: str, found: _Token | None) -> ValidationFailed:
        if found is None:
            column = len(self.command.rstrip()) + 1
            return _refusal(reason, f"expected {expected} at column {column}, found the end of the command", "", column)
        return _refusal(reason, f"expected {expected} at column {found.column}, found {found.text!r}", found.text, found.column)


def _keyword_of(token: _Token) -> str:
    """The token as a keyword, in upper case. ASCII only: Python upper-cases `ı` to `I` and `ſ` to `S`, which would
    accept `DıSPLAY` where COMMAND_PATTERN (and an operator's eye) does not."""
    return token.text.upper() if token.text.isascii() else token.text


def _check_name(name: _Token, *, patterns: bool) -> None:
    """Refuses a name (or, with `patterns`, a name with `*`s) that app.schemas.Name would refuse, pointing at the culprit."""
    text = name.text
    if len(text) > _NAME_MAX_LENGTH:
        message = (
            f"application environment name {text!r} at column {name.column} is {len(text)} characters long; at most {_NAME_MAX_LENGTH}"
        )
        raise _refusal(Refusal.BAD_NAME, message, text, name.column)
    candidate = text.replace("*", _WILDCARD_STAND_IN) if patterns else text
    if _NAME_PATTERN.fullmatch(candidate):
        return
    # The name's longest valid prefix ends just before the culprit (Name's pattern allows every prefix of a valid name).
    index = next(end - 1 for end in range(1, len(candidate) + 1) if not _NAME_PATTERN.fullmatch(candidate[:end]))
    culprit, column = text[index], name.column + index
    allowed_later = bool(_NAME_PATTERN.fullmatch(_WILDCARD_STAND_IN + culprit))
    where = "at the start of" if index == 0 and allowed_later else "in"
    message = f"{culprit!r} at column {column} is not allowed {where} an application environment name ({text!r})"
    if culprit == "*":
        message += "; patterns are for DISPLAY"
    raise _refusal(Refusal.BAD_NAME, message, culprit, column)


def _any_case(word: str) -> str:
    return "".join(f"[{letter}{letter.lower()}]" for letter in word)


def _one_of(*words: str) -> str:
    return "(" + "|".join(_any_case(word) for word in words) + ")"


def _name_pattern(*, wildcard: bool) -> str:
    """Name's pattern (`^[first][rest]*$`, at most _NAME_MAX_LENGTH long) as part of a larger one; with `wildcard`,
    `*` may stand anywhere, as _check_name lets it."""
    parts = re.fullmatch(r"\^\[(.+?)\]\[(.+)\]\*\$", str(_NAME_RULES.pattern))
    assert parts is not None, _NAME_RULES.pattern
    first, rest = (f"[{'*' if wildcard else ''}{part}]" for part in parts.groups())  # first: a trailing `-` stays literal
    return f"{first}{rest}{{0,{_NAME_MAX_LENGTH - 1}}}"


def _command_pattern() -> str:
    """The grammar above as one regular expression, for the OpenAPI document: what the reader accepts, so a client
    or a fuzzer knows it (tests/operator/test_commands.py holds the two to each other)."""
    blanks, separated = f"{_BLANK}*", f"{_BLANK}+"

    def separator(text: str) -> str:
        return f"{blanks}{text}{blanks}"

    head = f"{separator(',')}{_one_of(*_KEYWORD_IS_DYNAMIC)}{separator('=')}"
    vary = f"{_one_of('VARY', 'V')}{separated}{_any_case('WLM')}{head}{_name_pattern(wildcard=False)}{separator(',')}{_one_of(*_ACTIONS)}"
    display = f"{_one_of('DISPLAY', 'D')}{separated}{_any_case('WLM')}{head}{_name_pattern(wildcard=True)}"
    return f"^{blanks}({vary}|{display}){blanks}$"


COMMAND_PATTERN = _command_pattern()


def _refusal(reason: Refusal, message: str, token: str, column: int) -> ValidationFailed:
    return ValidationFailed([{"path": "command", "message": message, "reason": reason.value, "token": token, "column": column}])


def _keyword(dynamic: bool) -> str:
    return "DYNAPPL" if dynamic else "APPLENV"


# ---------------------------------------------------------------------------------------------------------------------
# The VARY request body
# ---------------------------------------------------------------------------------------------------------------------


def _upper_if_text(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


class VaryCommandText(StrictModel):
    """The text form: `{"command": "VARY WLM,APPLENV=PAYROLL,QUIESCE"}`."""

    # The pattern is declared rather than enforced: the reader refuses the same texts, saying where and why.
    command: Annotated[str, StringConstraints(max_length=COMMAND_MAX_LENGTH), Field(json_schema_extra={"pattern": COMMAND_PATTERN})]

    def to_command(self) -> VaryCommand:
        return parse_vary(self.command)


class VaryRequest(StrictModel):
    """The structured form: `{"action": "QUIESCE", "application_environment": "PAYROLL", "dynamic": false}`."""

    # Case-insensitive, like the command text and names.
    action: Annotated[Action, BeforeValidator(_upper_if_text)]
    application_environment: Name
    dynamic: StrictBool = False

    def to_command(self) -> VaryCommand:
        return VaryCommand(self.action, self.application_environment, self.dynamic)


_TEXT_FORM, _STRUCTURED_FORM = "text", "structured"
_FORM_OF_MODEL: dict[type, str] = {VaryCommandText: _TEXT_FORM, VaryRequest: _STRUCTURED_FORM}


def _vary_body_form(value: Any) -> str | None:
    """A body with `command` is the text form, whatever else it holds (the extra fields are then refused)."""
    if isinstance(value, dict):
        return _TEXT_FORM if "command" in value else _STRUCTURED_FORM
    return _FORM_OF_MODEL.get(type(value))


VaryBody = Annotated[
    Annotated[VaryCommandText, Tag(_TEXT_FORM)] | Annotated[VaryRequest, Tag(_STRUCTURED_FORM)],
    Discriminator(
        _vary_body_form,
        custom_error_type="vary_body",
        custom_error_message='expected an object: {"command": "VARY WLM,..."} or {"action": ..., "application_environment": ...}',
    ),
]
_VARY_BODY: TypeAdapter[VaryCommandText | VaryRequest] = TypeAdapter(VaryBody)


def parse_vary_body(data: Any) -> VaryCommand:
    """A VARY request body (decoded JSON) as a command; a 422 names the fields as the client wrote them.

    Use this rather than a FastAPI body parameter typed VaryBody: the shared handler would report the paths with the
    variant's tag in front (`structured.action`)."""
    try:
        body = _VARY_BODY.validate_python(data)
    except ValidationError as exc:
        raise ValidationFailed(pydantic_errors(exc.errors(), data, drop_prefix=(_TEXT_FORM, _STRUCTURED_FORM))) from exc
    return body.to_command()
