"""Operator commands (app/operator/commands.py): every spelling the parser takes and every refusal with its detail."""

from __future__ import annotations

import itertools
import re
import sys
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from app.errors import ValidationFailed
from app.operator.commands import (
    _BLANK,
    COMMAND_MAX_LENGTH,
    COMMAND_PATTERN,
    Action,
    DisplayCommand,
    Refusal,
    VaryBody,
    VaryCommand,
    VaryCommandText,
    VaryRequest,
    parse_command,
    parse_vary,
    parse_vary_body,
)
from app.shared.schemas import Name

NAME_32 = "A" * 32
NAME_33 = "A" * 33


def refusal(call: Any, command: str) -> dict[str, Any]:
    """The single 422 entry of a refused command, after checking the error's shape."""
    with pytest.raises(ValidationFailed) as caught:
        call(command)
    error = caught.value
    assert (error.status, error.code) == (422, "validation_failed")
    [entry] = error.details["errors"]
    assert entry["path"] == "command"
    assert error.message == f"command: {entry['message']}"
    assert error.body()["error"]["errors"] == [entry]
    return entry


# --------------------------------------------------------------------------------------------------------------------
# VARY: accepted spellings
# --------------------------------------------------------------------------------------------------------------------

VERBS = ("VARY", "V", "vary", "v", "Vary")
KEYWORDS = (("APPLENV", False), ("DYNAPPL", True), ("applenv", False), ("DynAppl", True))
ACTIONS = (
    ("QUIESCE", Action.QUIESCE),
    ("Q", Action.QUIESCE),
    ("quiesce", Action.QUIESCE),
    ("q", Action.QUIESCE),
    ("RESUME", Action.RESUME),
    ("Resume", Action.RESUME),
    ("REFRESH", Action.REFRESH),
    ("refresh", Action.REFRESH),
)


@pytest.mark.parametrize(
    ("verb", "keyword", "dynamic", "action_text", "action"),
    [
        (verb, keyword, dynamic, action_text, action)
        for verb, (keyword, dynamic), (action_text, action) in itertools.product(VERBS, KEYWORDS, ACTIONS)
    ],
)
def test_every_verb_keyword_and_action_spelling(verb: str, keyword: str, dynamic: bool, action_text: str, action: Action) -> None:
    command = f"{verb} WLM,{keyword}=payroll,{action_text}"
    assert parse_vary(command) == VaryCommand(action, "PAYROLL", dynamic)
    assert parse_command(command) == VaryCommand(action, "PAYROLL", dynamic)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # z/OS's own spellings, as its documentation gives them, including its blank after the comma.
        ("VARY WLM,APPLENV=applenvname,QUIESCE", VaryCommand(Action.QUIESCE, "APPLENVNAME", False)),
        ("VARY WLM, DYNAPPL=applenvname,QUIESCE", VaryCommand(Action.QUIESCE, "APPLENVNAME", True)),
        ("VARY WLM,APPLENV=applenvname,REFRESH", VaryCommand(Action.REFRESH, "APPLENVNAME", False)),
        ("VARY WLM,DYNAPPL=applenvname,REFRESH", VaryCommand(Action.REFRESH, "APPLENVNAME", True)),
        ("VARY WLM,APPLENV=applenvname,RESUME", VaryCommand(Action.RESUME, "APPLENVNAME", False)),
        ("VARY WLM, DYNAPPL=applenvname,RESUME", VaryCommand(Action.RESUME, "APPLENVNAME", True)),
        # Blanks around every separator, around the command, several between verb and WLM, tabs.
        ("VARY WLM , APPLENV = PAYROLL , RESUME", VaryCommand(Action.RESUME, "PAYROLL", False)),
        ("VARY WLM,APPLENV =PAYROLL,RESUME", VaryCommand(Action.RESUME, "PAYROLL", False)),
        ("VARY WLM,APPLENV= PAYROLL,RESUME", VaryCommand(Action.RESUME, "PAYROLL", False)),
        ("VARY WLM,APPLENV=PAYROLL ,RESUME", VaryCommand(Action.RESUME, "PAYROLL", False)),
        ("  VARY   WLM,APPLENV=PAYROLL,RESUME  ", VaryCommand(Action.RESUME, "PAYROLL", False)),
        ("V\tWLM,\tDYNAPPL\t=\tPAYROLL,\tREFRESH\n", VaryCommand(Action.REFRESH, "PAYROLL", True)),
        ("Vary Wlm,ApplEnv=PayRoll,Quiesce", VaryCommand(Action.QUIESCE, "PAYROLL", False)),
        # Names: every character Name allows, its shortest and longest.
        ("V WLM,APPLENV=A,Q", VaryCommand(Action.QUIESCE, "A", False)),
        ("V WLM,APPLENV=1ST,Q", VaryCommand(Action.QUIESCE, "1ST", False)),
        ("V WLM,APPLENV=$sys#@_x.y-z,Q", VaryCommand(Action.QUIESCE, "$SYS#@_X.Y-Z", False)),
        ("V WLM,APPLENV=_X,Q", VaryCommand(Action.QUIESCE, "_X", False)),
        (f"V WLM,APPLENV={NAME_32},Q", VaryCommand(Action.QUIESCE, NAME_32, False)),
    ],
)
def test_vary_spellings(command: str, expected: VaryCommand) -> None:
    assert parse_vary(command) == expected


@pytest.mark.parametrize(
    ("command", "canonical"),
    [
        ("v wlm,applenv=payroll,q", "VARY WLM,APPLENV=PAYROLL,QUIESCE"),
        ("VARY WLM, DYNAPPL=x,RESUME", "VARY WLM,DYNAPPL=X,RESUME"),
        ("V WLM , APPLENV = $A.B , refresh", "VARY WLM,APPLENV=$A.B,REFRESH"),
    ],
)
def test_canonical_text_parses_back_to_the_same_command(command: str, canonical: str) -> None:
    parsed = parse_vary(command)
    assert str(parsed) == canonical
    assert parse_vary(str(parsed)) == parsed


def test_vary_command_is_frozen() -> None:
    command = VaryCommand(Action.QUIESCE, "PAYROLL", False)
    with pytest.raises(AttributeError):
        command.action = Action.RESUME  # type: ignore[misc]


# --------------------------------------------------------------------------------------------------------------------
# VARY: refusals, each with its reason, token, column and message
# --------------------------------------------------------------------------------------------------------------------

ACTION_CHOICES = "QUIESCE (or Q), RESUME or REFRESH"


VARY_REFUSALS = [
    ("", Refusal.EMPTY, "", 1, "the command is empty"),
    ("   \t ", Refusal.EMPTY, "", 1, "the command is empty"),
    ("STOP WLM,APPLENV=X,Q", Refusal.UNKNOWN_VERB, "STOP", 1, "expected VARY (or V) at column 1, found 'STOP'"),
    ("  VARYWLM,APPLENV=X,Q", Refusal.UNKNOWN_VERB, "VARYWLM", 3, "expected VARY (or V) at column 3, found 'VARYWLM'"),
    ("D WLM,APPLENV=X", Refusal.UNKNOWN_VERB, "D", 1, "expected VARY (or V) at column 1, found 'D'"),
    ("DISPLAY WLM,APPLENV=X", Refusal.UNKNOWN_VERB, "DISPLAY", 1, "expected VARY (or V) at column 1, found 'DISPLAY'"),
    (",WLM", Refusal.UNKNOWN_VERB, ",", 1, "expected VARY (or V) at column 1, found ','"),
    ("VARY", Refusal.MISSING_WLM, "", 5, "expected WLM after VARY at column 5, found the end of the command"),
    ("v  ", Refusal.MISSING_WLM, "", 2, "expected WLM after V at column 2, found the end of the command"),
    ("VARY,WLM,APPLENV=X,Q", Refusal.MISSING_WLM, ",", 5, "expected WLM after VARY at column 5, found ','"),
    ("VARY WLX,APPLENV=X,Q", Refusal.MISSING_WLM, "WLX", 6, "expected WLM after VARY at column 6, found 'WLX'"),
    ("VARY APPLENV=X,Q", Refusal.MISSING_WLM, "APPLENV", 6, "expected WLM after VARY at column 6, found 'APPLENV'"),
    ("VARY WLM APPLENV=X,Q", Refusal.MISSING_COMMA, "APPLENV", 10, "expected ',' at column 10, found 'APPLENV'"),
    ("VARY WLM=APPLENV", Refusal.MISSING_COMMA, "=", 9, "expected ',' at column 9, found '='"),
    (
        "VARY WLM",
        Refusal.MISSING_APPLICATION_ENVIRONMENT,
        "",
        9,
        "expected ',APPLENV=name' or ',DYNAPPL=name' at column 9, found the end of the command",
    ),
    (
        "VARY WLM,",
        Refusal.MISSING_APPLICATION_ENVIRONMENT,
        "",
        10,
        "expected APPLENV= or DYNAPPL= at column 10, found the end of the command",
    ),
    ("VARY WLM,APPL=X,Q", Refusal.MISSING_APPLICATION_ENVIRONMENT, "APPL", 10, "expected APPLENV= or DYNAPPL= at column 10, found 'APPL'"),
    ("VARY WLM,,APPLENV=X,Q", Refusal.MISSING_APPLICATION_ENVIRONMENT, ",", 10, "expected APPLENV= or DYNAPPL= at column 10, found ','"),
    ("VARY WLM,=X,Q", Refusal.MISSING_APPLICATION_ENVIRONMENT, "=", 10, "expected APPLENV= or DYNAPPL= at column 10, found '='"),
    ("VARY WLM,APPLENV", Refusal.MISSING_EQUALS, "", 17, "expected '=' after APPLENV at column 17, found the end of the command"),
    ("VARY WLM,applenv,Q", Refusal.MISSING_EQUALS, ",", 17, "expected '=' after APPLENV at column 17, found ','"),
    ("VARY WLM,DYNAPPL X,Q", Refusal.MISSING_EQUALS, "X", 18, "expected '=' after DYNAPPL at column 18, found 'X'"),
    ("VARY WLM,APPLENV=", Refusal.BAD_NAME, "", 18, "expected an application environment name at column 18, found the end of the command"),
    ("VARY WLM,APPLENV=,Q", Refusal.BAD_NAME, ",", 18, "expected an application environment name at column 18, found ','"),
    ("VARY WLM,APPLENV==X,Q", Refusal.BAD_NAME, "=", 18, "expected an application environment name at column 18, found '='"),
    (
        "VARY WLM,APPLENV=PAY!ROLL,Q",
        Refusal.BAD_NAME,
        "!",
        21,
        "'!' at column 21 is not allowed in an application environment name ('PAY!ROLL')",
    ),
    (
        "VARY WLM,APPLENV=.PAYROLL,Q",
        Refusal.BAD_NAME,
        ".",
        18,
        "'.' at column 18 is not allowed at the start of an application environment name ('.PAYROLL')",
    ),
    (
        "VARY WLM,APPLENV=!X,Q",
        Refusal.BAD_NAME,
        "!",
        18,
        "'!' at column 18 is not allowed in an application environment name ('!X')",
    ),
    (
        "VARY WLM,APPLENV=-X,Q",
        Refusal.BAD_NAME,
        "-",
        18,
        "'-' at column 18 is not allowed at the start of an application environment name ('-X')",
    ),
    (
        "VARY WLM,APPLENV=PAYÉ,Q",
        Refusal.BAD_NAME,
        "É",
        21,
        "'É' at column 21 is not allowed in an application environment name ('PAYÉ')",
    ),
    (
        "VARY WLM,APPLENV=PAY*,Q",
        Refusal.BAD_NAME,
        "*",
        21,
        "'*' at column 21 is not allowed in an application environment name ('PAY*'); patterns are for DISPLAY",
    ),
    (
        f"VARY WLM,APPLENV={NAME_33},Q",
        Refusal.BAD_NAME,
        NAME_33,
        18,
        f"application environment name '{NAME_33}' at column 18 is 33 characters long; at most 32",
    ),
    (
        "VARY WLM,APPLENV=PAYROLL",
        Refusal.MISSING_ACTION,
        "",
        25,
        f"expected ',' and {ACTION_CHOICES} at column 25, found the end of the command",
    ),
    ("VARY WLM,APPLENV=PAYROLL,", Refusal.MISSING_ACTION, "", 26, f"expected {ACTION_CHOICES} at column 26, found the end of the command"),
    (
        "VARY WLM,APPLENV=PAYROLL , ",
        Refusal.MISSING_ACTION,
        "",
        27,
        f"expected {ACTION_CHOICES} at column 27, found the end of the command",
    ),
    ("VARY WLM,APPLENV=PAYROLL,,Q", Refusal.MISSING_ACTION, ",", 26, f"expected {ACTION_CHOICES} at column 26, found ','"),
    ("VARY WLM,APPLENV=PAYROLL,=Q", Refusal.MISSING_ACTION, "=", 26, f"expected {ACTION_CHOICES} at column 26, found '='"),
    ("VARY WLM,APPLENV=PAYROLL QUIESCE", Refusal.MISSING_COMMA, "QUIESCE", 26, "expected ',' at column 26, found 'QUIESCE'"),
    ("VARY WLM,APPLENV=PAY ROLL,Q", Refusal.MISSING_COMMA, "ROLL", 22, "expected ',' at column 22, found 'ROLL'"),
    ("VARY WLM,APPLENV=PAYROLL=Q", Refusal.MISSING_COMMA, "=", 25, "expected ',' at column 25, found '='"),
    ("VARY WLM,APPLENV=PAYROLL,STOP", Refusal.UNKNOWN_ACTION, "STOP", 26, f"expected {ACTION_CHOICES} at column 26, found 'STOP'"),
    ("VARY WLM,APPLENV=PAYROLL,QUIES", Refusal.UNKNOWN_ACTION, "QUIES", 26, f"expected {ACTION_CHOICES} at column 26, found 'QUIES'"),
    ("VARY WLM,APPLENV=PAYROLL,R", Refusal.UNKNOWN_ACTION, "R", 26, f"expected {ACTION_CHOICES} at column 26, found 'R'"),
    (
        "VARY WLM,APPLENV=PAYROLL,Q,NOW  ",
        Refusal.EXTRA_OPERAND,
        ",NOW",
        27,
        "unexpected ',NOW' at column 27: the command is complete before it",
    ),
    (
        "VARY WLM,APPLENV=PAYROLL,QUIESCE IMMEDIATELY",
        Refusal.EXTRA_OPERAND,
        "IMMEDIATELY",
        34,
        "unexpected 'IMMEDIATELY' at column 34: the command is complete before it",
    ),
    ("VARY WLM,APPLENV=PAYROLL,Q,", Refusal.EXTRA_OPERAND, ",", 27, "unexpected ',' at column 27: the command is complete before it"),
    (
        "VARY WLM,DYNAPPL=X,Q,SNODE=N1",
        Refusal.EXTRA_OPERAND,
        ",SNODE=N1",
        21,
        "unexpected ',SNODE=N1' at column 21: the command is complete before it",
    ),
]


@pytest.mark.parametrize(("command", "reason", "token", "column", "message"), VARY_REFUSALS)
def test_vary_refusals(command: str, reason: Refusal, token: str, column: int, message: str) -> None:
    assert refusal(parse_vary, command) == {"path": "command", "message": message, "reason": reason.value, "token": token, "column": column}


@pytest.mark.parametrize(
    "name",
    [
        "A",
        "a",
        "PAYROLL",
        "$",
        "#1",
        "@x",
        "_",
        "9",
        "A.B-C",
        "A" * 32,
        "A" * 33,
        ".A",
        "-A",
        "A!",
        "A/B",
        "A+B",
        "A:B",
        "A*",
        "é",
        "A\u00a0",
    ],
)
def test_names_follow_the_name_type(name: str) -> None:
    """The command accepts exactly the names the API's Name type accepts, in the same (upper) case."""
    try:
        expected: str | None = TypeAdapter(Name).validate_python(name)
    except ValidationError:
        expected = None
    try:
        parsed: str | None = parse_vary(f"VARY WLM,APPLENV={name},Q").application_environment
    except ValidationFailed:
        parsed = None
    assert parsed == expected


# --------------------------------------------------------------------------------------------------------------------
# DISPLAY
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("D WLM,APPLENV=*", DisplayCommand("*", False)),
        ("DISPLAY WLM,APPLENV=*", DisplayCommand("*", False)),
        ("d wlm,applenv=payroll", DisplayCommand("PAYROLL", False)),
        ("Display Wlm,DynAppl=Pay*", DisplayCommand("PAY*", True)),
        ("D WLM,DYNAPPL=*", DisplayCommand("*", True)),
        ("  D  WLM , APPLENV = *  ", DisplayCommand("*", False)),
        ("D WLM, APPLENV=*ROLL", DisplayCommand("*ROLL", False)),
        ("D WLM,APPLENV=P*R*L", DisplayCommand("P*R*L", False)),
        ("D WLM,APPLENV=**", DisplayCommand("**", False)),
        ("D WLM,APPLENV=*.X", DisplayCommand("*.X", False)),
        (f"D WLM,APPLENV={'*' * 32}", DisplayCommand("*" * 32, False)),
    ],
)
def test_display_spellings(command: str, expected: DisplayCommand) -> None:
    assert parse_command(command) == expected
    assert parse_command(command) == expected


DISPLAY_REFUSALS = [
    ("", Refusal.EMPTY, "", 1, "the command is empty"),
    ("DIS WLM,APPLENV=*", Refusal.UNKNOWN_VERB, "DIS", 1, "expected VARY (or V) or DISPLAY (or D) at column 1, found 'DIS'"),
    ("DISPLAY", Refusal.MISSING_WLM, "", 8, "expected WLM after DISPLAY at column 8, found the end of the command"),
    ("D XCF,APPLENV=*", Refusal.MISSING_WLM, "XCF", 3, "expected WLM after D at column 3, found 'XCF'"),
    (
        "D WLM",
        Refusal.MISSING_APPLICATION_ENVIRONMENT,
        "",
        6,
        "expected ',APPLENV=name' or ',DYNAPPL=name' at column 6, found the end of the command",
    ),
    ("D WLM APPLENV=*", Refusal.MISSING_COMMA, "APPLENV", 7, "expected ',' at column 7, found 'APPLENV'"),
    ("D WLM,SYSTEMS", Refusal.MISSING_APPLICATION_ENVIRONMENT, "SYSTEMS", 7, "expected APPLENV= or DYNAPPL= at column 7, found 'SYSTEMS'"),
    ("D WLM,APPLENV", Refusal.MISSING_EQUALS, "", 14, "expected '=' after APPLENV at column 14, found the end of the command"),
    (
        "D WLM,APPLENV=",
        Refusal.BAD_NAME,
        "",
        15,
        "expected an application environment name or pattern at column 15, found the end of the command",
    ),
    (
        "D WLM,APPLENV=PAY!*",
        Refusal.BAD_NAME,
        "!",
        18,
        "'!' at column 18 is not allowed in an application environment name ('PAY!*')",
    ),
    (
        "D WLM,APPLENV=.*",
        Refusal.BAD_NAME,
        ".",
        15,
        "'.' at column 15 is not allowed at the start of an application environment name ('.*')",
    ),
    (
        "D WLM,APPLENV=PAY?",
        Refusal.BAD_NAME,
        "?",
        18,
        "'?' at column 18 is not allowed in an application environment name ('PAY?')",
    ),
    (
        f"D WLM,APPLENV={'*' * 33}",
        Refusal.BAD_NAME,
        "*" * 33,
        15,
        f"application environment name '{'*' * 33}' at column 15 is 33 characters long; at most 32",
    ),
    (
        "D WLM,APPLENV=*,QUIESCE",
        Refusal.EXTRA_OPERAND,
        ",QUIESCE",
        16,
        "unexpected ',QUIESCE' at column 16: the command is complete before it",
    ),
    ("D WLM,APPLENV=PAY ROLL", Refusal.EXTRA_OPERAND, "ROLL", 19, "unexpected 'ROLL' at column 19: the command is complete before it"),
]


@pytest.mark.parametrize(("command", "reason", "token", "column", "message"), DISPLAY_REFUSALS)
def test_display_refusals(command: str, reason: Refusal, token: str, column: int, message: str) -> None:
    assert refusal(parse_command, command) == {
        "path": "command",
        "message": message,
        "reason": reason.value,
        "token": token,
        "column": column,
    }


def test_every_refusal_reason_is_exercised() -> None:
    """The refusal tables reach each reason: none is documented but unreachable."""
    assert {reason for _, reason, *_ in VARY_REFUSALS + DISPLAY_REFUSALS} == set(Refusal)


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("STOP WLM", "expected VARY (or V) or DISPLAY (or D) at column 1, found 'STOP'"),
        ("VARY WLM,APPLENV=*,Q", "'*' at column 18 is not allowed in an application environment name ('*'); patterns are for DISPLAY"),
        ("D WLM,APPLENV=X,Q", "unexpected ',Q' at column 16: the command is complete before it"),
    ],
)
def test_parse_command_refuses_by_the_grammar_of_its_verb(command: str, message: str) -> None:
    assert refusal(parse_command, command)["message"] == message


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("*", "PAYROLL", True),
        ("*", "A", True),
        ("PAYROLL", "PAYROLL", True),
        ("PAYROLL", "payroll", True),
        ("PAYROLL", "PAYROLLX", False),
        ("PAY*", "PAYROLL", True),
        ("PAY*", "PAY", True),
        ("PAY*", "XPAY", False),
        ("*ROLL", "PAYROLL", True),
        ("*ROLL", "ROLLS", False),
        ("P*R*L", "PAYROLL", True),
        ("P*R*L", "PAYROLLS", False),
    ],
)
def test_display_pattern_matches(pattern: str, name: str, expected: bool) -> None:
    assert DisplayCommand(pattern, False).matches(name) is expected


# --------------------------------------------------------------------------------------------------------------------
# The VARY request body: text form, structured form
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"command": "VARY WLM,APPLENV=PAYROLL,QUIESCE"}, VaryCommand(Action.QUIESCE, "PAYROLL", False)),
        ({"command": "v wlm, dynappl=payroll, resume"}, VaryCommand(Action.RESUME, "PAYROLL", True)),
        ({"action": "QUIESCE", "application_environment": "PAYROLL"}, VaryCommand(Action.QUIESCE, "PAYROLL", False)),
        ({"action": "refresh", "application_environment": " payroll ", "dynamic": True}, VaryCommand(Action.REFRESH, "PAYROLL", True)),
        ({"action": "Resume", "application_environment": "$A.B", "dynamic": False}, VaryCommand(Action.RESUME, "$A.B", False)),
    ],
)
def test_vary_body_forms(body: dict[str, Any], expected: VaryCommand) -> None:
    assert parse_vary_body(body) == expected
    assert TypeAdapter(VaryBody).validate_python(body).to_command() == expected


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        (
            5,
            [
                {
                    "path": "(root)",
                    "message": 'expected an object: {"command": "VARY WLM,..."} or {"action": ..., "application_environment": ...}',
                }
            ],
        ),
        (
            ["VARY WLM,APPLENV=X,Q"],
            [
                {
                    "path": "(root)",
                    "message": 'expected an object: {"command": "VARY WLM,..."} or {"action": ..., "application_environment": ...}',
                }
            ],
        ),
        ({}, [{"path": "action", "message": "Field required"}, {"path": "application_environment", "message": "Field required"}]),
        ({"command": 5}, [{"path": "command", "message": "Input should be a valid string"}]),
        ({"command": None}, [{"path": "command", "message": "Input should be a valid string"}]),
        (
            {"command": "V" * (COMMAND_MAX_LENGTH + 1)},
            [{"path": "command", "message": f"String should have at most {COMMAND_MAX_LENGTH} characters"}],
        ),
        # `command` selects the text form: the structured fields next to it are refused, not merged.
        ({"command": "VARY WLM,APPLENV=X,Q", "action": "QUIESCE"}, [{"path": "action", "message": "Extra inputs are not permitted"}]),
        (
            {"action": "Q", "application_environment": "X"},
            [{"path": "action", "message": "Input should be 'QUIESCE', 'RESUME' or 'REFRESH'"}],
        ),
        (
            {"action": 1, "application_environment": "X"},
            [{"path": "action", "message": "Input should be 'QUIESCE', 'RESUME' or 'REFRESH'"}],
        ),
        (
            {"action": "QUIESCE", "application_environment": "PAY ROLL"},
            [{"path": "application_environment", "message": "String should match pattern '^[A-Za-z0-9$#@_][A-Za-z0-9$#@_.-]*$'"}],
        ),
        (
            {"action": "QUIESCE", "application_environment": NAME_33},
            [{"path": "application_environment", "message": "String should have at most 32 characters"}],
        ),
        (
            {"action": "QUIESCE", "application_environment": "X", "dynamic": "maybe"},
            [{"path": "dynamic", "message": "Input should be a valid boolean"}],
        ),
        (
            {"action": "QUIESCE", "application_environment": "X", "node": "N1"},
            [{"path": "node", "message": "Extra inputs are not permitted"}],
        ),
    ],
)
def test_vary_body_refusals_name_the_fields_as_sent(body: Any, errors: list[dict[str, str]]) -> None:
    with pytest.raises(ValidationFailed) as caught:
        parse_vary_body(body)
    assert caught.value.details["errors"] == errors


def test_a_command_that_does_not_parse_is_refused_with_its_detail() -> None:
    with pytest.raises(ValidationFailed) as caught:
        parse_vary_body({"command": "VARY WLM,APPLENV=PAYROLL,STOP"})
    assert caught.value.body() == {
        "error": {
            "code": "validation_failed",
            "message": f"command: expected {ACTION_CHOICES} at column 26, found 'STOP'",
            "errors": [
                {
                    "path": "command",
                    "message": f"expected {ACTION_CHOICES} at column 26, found 'STOP'",
                    "reason": "unknown_action",
                    "token": "STOP",
                    "column": 26,
                }
            ],
        }
    }


def test_a_display_command_is_no_vary_body() -> None:
    with pytest.raises(ValidationFailed) as caught:
        parse_vary_body({"command": "D WLM,APPLENV=*"})
    assert caught.value.details["errors"][0]["reason"] == "unknown_verb"


@pytest.mark.parametrize(
    "model",
    [VaryCommandText(command="V WLM,APPLENV=X,Q"), VaryRequest(action=Action.QUIESCE, application_environment="X")],
)
def test_validated_bodies_keep_their_form(model: VaryCommandText | VaryRequest) -> None:
    assert TypeAdapter(VaryBody).validate_python(model) is model
    assert model.to_command() == VaryCommand(Action.QUIESCE, "X", False)


def test_vary_body_schema_offers_both_forms() -> None:
    schema = TypeAdapter(VaryBody).json_schema()
    assert schema["oneOf"] == [{"$ref": "#/$defs/VaryCommandText"}, {"$ref": "#/$defs/VaryRequest"}]
    assert schema["$defs"]["VaryRequest"]["required"] == ["action", "application_environment"]
    assert schema["$defs"]["VaryCommandText"]["required"] == ["command"]


# --------------------------------------------------------------------------------------------------------------------
# COMMAND_PATTERN: the grammar as the OpenAPI document declares it
# --------------------------------------------------------------------------------------------------------------------


def _parses(command: str) -> bool:
    try:
        parse_command(command)
    except ValidationFailed:
        return False
    return True


EVERY_COMMAND_ABOVE = [
    *(f"{verb} WLM,{keyword}=PAYROLL,{action}" for verb, (keyword, _), (action, _) in itertools.product(VERBS, KEYWORDS, ACTIONS)),
    *(f"VARY WLM,APPLENV={name},Q" for name in ("A", "$sys#@_x.y-z", NAME_32, NAME_33, ".A", "-A", "A!", "A*", "é", "A\u00a0")),
    *(f"D WLM,APPLENV={pattern}" for pattern in ("*", "**", "*.X", "P*R*L", "*" * 32, "*" * 33, ".*", "A\u00a0")),
    *(command for command, *_ in VARY_REFUSALS + DISPLAY_REFUSALS),
    "V\tWLM,\tDYNAPPL\t=\tPAYROLL,\tREFRESH\n",
    "  D  WLM , APPLENV = *  ",
    "DıSPLAY WLM,APPLENV=*",  # Python upper-cases ı to I
    "VARY WLM,APPLENV=X,QUIEſCE",  # ... and ſ to S
    "D\u3000WLM,APPLENV=X\ufeff",  # a blank to Python, and one to ECMA-262 only
]


@pytest.mark.parametrize("command", EVERY_COMMAND_ABOVE)
def test_the_declared_pattern_accepts_what_the_parser_accepts(command: str) -> None:
    """OpenAPI's pattern and the reader agree, so a generated client or a fuzzer knows which texts parse."""
    assert (re.fullmatch(COMMAND_PATTERN, command) is not None) == _parses(command)


def test_a_blank_is_what_python_strips() -> None:
    blanks = {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}
    assert {chr(c) for c in range(sys.maxunicode + 1) if re.fullmatch(_BLANK, chr(c))} == blanks


def test_the_text_form_declares_the_pattern() -> None:
    schema = TypeAdapter(VaryCommandText).json_schema()["properties"]["command"]
    assert schema == {"maxLength": COMMAND_MAX_LENGTH, "pattern": COMMAND_PATTERN, "title": "Command", "type": "string"}
