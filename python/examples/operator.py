"""A supervising "main AI" as lev's operator of one session, and a worker that
asks it things.

Start `lev demo` and paste the LEV_URL / LEV_TOKEN lines it prints, then:

    python examples/operator.py            # the operator, and a worker asking it
    python examples/operator.py --serve    # only the operator, until Ctrl-C

The operator answers the worker's questions, vets and runs its spawns, and
triages interactions routed to it: it decides what it can and defers the rest
to people, whose answer (in the dashboard, or `lev respond ID --text ...`)
completes the worker's call.

With a token of your own, the operator needs the operator role and the session:
`lev token create main-ai --role operator --sessions 'py-operator*'`.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import lev
from lev.operator import DEFER, Ask, Defer, Hook, Operator, Reject, SpawnOrder, SpawnOutcome, Triage

SESSION = "py-operator"

op = Operator(SESSION)  # LEV_URL and LEV_TOKEN from the environment


@op.on_ask
async def answer(ask: Ask) -> Any:
    """A worker's question. A real operator would ask its model here."""
    if ask.question == "What is 6 * 7?":
        return 42
    # No answer of its own: lev hands the question to people once the operator
    # has not replied within `lev serve --operator-reply-timeout` (120 s by default).
    return Defer("the operator does not know")


@op.on_hook
def vet(hook: Hook) -> bool | Reject:
    """A spawn, before it runs. Plain functions run in a thread."""
    if hook.spawn.get("agent") not in ("lint", "tests"):
        return Reject(f"this session spawns lint and tests only, not {hook.spawn.get('agent')}")
    return True


@op.on_spawn
async def spawn(order: SpawnOrder) -> SpawnOutcome | Defer:
    """Run the sub-agent. It posts its result with the task's own token; the
    ack defers to that result."""
    await asyncio.sleep(0.5)  # the sub-agent at work
    await order.post_result({"agent": order.spawn["agent"], "findings": 0}, output_tail="ok\n")
    return DEFER


@op.on_triage
async def triage(item: Triage) -> Any:
    """An interaction routed to the operator first: decide it, or defer it to people."""
    kind = item.interaction["kind"]
    if kind["type"] == "free_text" and "customer" in kind["prompt"]:
        return {"value": "ACME Corp"}
    return Defer("refunds are for people to decide")


async def worker() -> None:
    async with lev.AsyncClient() as w:
        got = await w.ask_operator(SESSION, "What is 6 * 7?", timeout_s=60)
        print(f"worker asked 6 * 7; {got['answered_by']} answered {got['answer']}")

        result = await w.spawn(SESSION, {"agent": "lint"}, timeout_s=60)
        print(f"worker spawned lint as {result['task_id']}: {result['value']}")
        try:
            await w.spawn(SESSION, {"agent": "deploy"}, timeout_s=60)
        except lev.ApiError as e:
            print(f"worker spawned deploy: refused, {e.code}: {e.message}")

        routed = ["operator", "human"]
        print(
            "worker:",
            await w.ask("Which customer is this ticket from?", session_id=SESSION, route=routed),
        )
        print("a refund goes to people: answer it in the dashboard, or with `lev respond`")
        print("worker:", await w.ask("Refund order 1234?", session_id=SESSION, route=routed))


async def main() -> None:
    running = asyncio.ensure_future(op.run())
    if "--serve" in sys.argv:
        print(f"operator of session {SESSION}; Ctrl-C stops it")
        await running
        return
    try:
        while not op.connected:
            if running.done():
                running.result()  # a refused token or an unreachable server: its error
            await asyncio.sleep(0.05)
        await worker()
    finally:
        op.stop()
        await running


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except lev.LevError as e:
        sys.exit(f"error: {e}")
    except KeyboardInterrupt:
        pass
