"""The turns of `Runtime.exec()` that end in a decision (E2) or in a reply parsed against a schema:
a whole turn with native tools, then its last reply is checked by the decision loop.
"""
from __future__ import annotations

import json

from ..base.errors import AttemptError, ModelCallError
from ..base.model_protocol import ModelCaller, blocks_text, check_modes
from ..base.run_hooks import edited_options
from ..decision.confidence import check_threshold
from ..decision.conformal import check_on
from ..decision.loop import DECISION_FINISH_INSTRUCTION, Decider
from ..decision.options import (
    Param,
    SchemaOption,
    check_context,
    normalize,
    param_lines,
    render_menu,
    schema_field,
    validate,
)
from ..decision.options.shortlist import narrow
from ..trace.decision_trace import emit
from ..trace.records import ToolRound, replace

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is for annotations here, and they are never evaluated
    from typing import Any

    from ..decision.settings import Settings

# ---------------------------------------------------------------------------------------------
# Turns that end in a decision (E2): a whole turn with tools, then its last reply is checked
# ---------------------------------------------------------------------------------------------


def _append_text(blocks: list[dict], text: str) -> list[dict]:
    """The turn with `text` after its prompt: `prompt + "\\n\\n" + text` when the turn ends with
    a text block, else a text block of its own."""
    if blocks and blocks[-1].get("type") == "text":
        last = dict(blocks[-1], text=blocks[-1].get("text", "") + "\n\n" + text)
        return blocks[:-1] + [last]
    return blocks + [{"type": "text", "text": text}]


async def _turn(d: Decider, content: list[dict], tools: list, max_iterations: int) -> None:
    """Attempt 1 of an exec() decision: a whole turn, tool rounds included. In tools mode the
    choices are tools too: a reply that calls one ends the turn, and the mode reads the pick
    from it (a choice that is also a work tool counts as the choice)."""
    def on_tool(n, tc, result, error, seconds):
        if emit("tool_call", d.trace, d.att,
                round=ToolRound(n, tc.name, dict(tc.args) if isinstance(tc.args, dict)
                                else tc.args, result, error, seconds)):
            d.shown = d.att  # an observer holds this record now: the loop copies it to change it

    from . import tools as _tools
    try:
        await _tools.tool_loop(d.runtime, [{"role": "user", "content": content}], tools,
                               max_iterations=max_iterations, deadline=d.deadline, call=d.call,
                               on_tool=on_tool, context=d.context, sync=d.sync,
                               stop_on=d.mode.ends_turn())
    except ModelCallError as exc:
        d.fail_with(AttemptError(exc.kind, str(exc)), cause=exc)


async def run_agent_decision(rt: ModelCaller, blocks: list[dict], options: Any, tools: list,
                             settings: Settings, *, max_iterations: int,
                             deadline: float | None, sync: bool = True, where: str = "agent"):
    """`exec(options=)` (E2): one turn with tools, then the last reply is the decision; one
    re-pick, fixed. In menu mode the finish instruction and the menu end the prompt; in the
    other modes the choices travel as tools or as the schema. `shortlist=` narrows the
    options against the request first, as in `decision.make`."""
    menu = normalize(edited_options(options))  # a fork may edit them (openprogram.runs)
    check_context(menu, settings.context)
    request = blocks_text(blocks)
    if settings.pick_set is not None:   # fitted on the whole menu, before a shortlist narrows it
        check_on(settings.pick_set, [o.name for o in menu], render_menu(menu), settings.mode,
                 settings.confidence.on(rt, settings.mode, where), settings.shortlist, where)
    menu, listing = narrow(settings.shortlist, request, menu, runtime=rt, way=settings.mode)
    way = settings.mode(menu)
    check_modes(rt, way.name)
    source = settings.confidence.on(rt, settings.mode, where)
    check_threshold(settings.min_confidence, settings.low_confidence, source,
                    [o.name for o in menu], where, settings.pick_set)
    source.check_turn(tools)
    settings = settings.bound(confidence=source)
    menu_text = render_menu(menu)
    turn = _append_text(blocks, DECISION_FINISH_INSTRUCTION + "\n\n" + menu_text) \
        if way.menu_in_prompt else blocks
    with rt.dag.span("decision", "agent(options=)"):
        d = Decider(rt, menu, settings, request=request, max_attempts=2, entry="agent",
                    deadline=deadline, menu_text=menu_text, sync=sync, mode=way,
                    shortlist=listing)
        with d.running():
            d.new_attempt(blocks_text(turn))
            await _turn(d, turn, tools, max_iterations)
            return await d.settle()


async def run_format(rt: ModelCaller, blocks: list[dict], response_format: Any, tools: list,
                     settings: Settings, *, max_iterations: int, deadline: float | None,
                     sync: bool = True):
    """`exec(response_format=schema)`: the reply is one JSON object of the schema's form,
    validated like a schema option's fields; one re-ask, fixed. `mode` asks for it as text
    (menu), as one forced tool (tools) or as the provider's structured output (json_schema)."""
    schema = schema_field(response_format, "response_format")
    if schema.type != "object":
        raise TypeError("response_format must be a dict schema {field: type, ...}")
    option = SchemaOption("response", "the requested JSON object",
                          [Param(k, f) for k, f in (schema.fields or {}).items()])
    menu_text = "\n".join([
        "Reply with one JSON object of this form, in a ```json fenced block:",
        *param_lines(option),
        "  Example: " + json.dumps(schema.placeholder(), ensure_ascii=False)])
    way = settings.mode.for_format(option)
    check_modes(rt, way.name)
    request = blocks_text(blocks)
    turn = _append_text(blocks, menu_text) if way.menu_in_prompt else blocks

    def check():
        ex = d.extract()
        dropped: list[str] = []
        try:
            value = validate(way.payload(ex.action), schema, "response", dropped)
        finally:
            d.att = replace(d.att, dropped=list(dropped))
        d.att = replace(d.att, chosen="response", args=value)
        return option, value

    with rt.dag.span("decision", "exec(response_format=)"):
        d = Decider(rt, [option], settings, request=request, max_attempts=2, entry="format",
                    deadline=deadline, menu_text=menu_text, sync=sync, mode=way)
        with d.running():
            d.new_attempt(blocks_text(turn))
            await _turn(d, turn, tools, max_iterations)
            _, value = await d.settle(check, run=False)
            return d.finish("resolved", result=value)
