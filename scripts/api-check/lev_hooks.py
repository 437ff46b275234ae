"""Schemathesis hooks for lev's API check (scripts/api-check.sh).

The long polls (an operator ask or spawn, a wait, the Claude Code hook) hold
a valid request open for as long as its `timeout_s` says, up to a day: that
is the contract, not a hang. Before each request is sent, a `timeout_s`
above two seconds (or absent) becomes two, so the run stays short; a
`timeout_s` of the wrong type or sign is sent as generated, and every other
input is left alone.
"""

from typing import Any

import schemathesis

LONG_POLLS = {
    "/v1/sessions/{sid}/ask",
    "/v1/sessions/{sid}/spawn",
    "/v1/interactions/{id}/wait",
    "/v1/hooks/claude-code",
}
CAP = 2


def _capped(value: Any) -> bool:
    """Whether `value` is a timeout to replace with CAP."""
    if value is None:
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value > CAP
    if isinstance(value, str) and value.isdigit():
        return int(value) > CAP
    return False


@schemathesis.hook
def before_call(ctx: Any, case: Any, **kwargs: Any) -> None:
    if case.operation.path not in LONG_POLLS:
        return
    if isinstance(case.body, dict) and _capped(case.body.get("timeout_s")):
        case.body["timeout_s"] = CAP
    if case.query is None:
        case.query = {}
    if isinstance(case.query, dict) and _capped(case.query.get("timeout_s")):
        case.query["timeout_s"] = CAP
