"""`python -m openprogram tour` and `steps`: the mechanism in a terminal, on the scripted model.

One decision that fails validation and recovers on the re-ask, printed as its trace (`tour`) or
stage by stage, each stage with the rule it shows (`steps`); no Jupyter, no key, no network.
"""
from __future__ import annotations

import argparse
import sys


def _example():
    """The tour's decision: its prompt, option set and scripted runtime."""
    from .runtimes import ScriptedRuntime

    def analyze(text: str, depth: int = 1) -> str:
        """Analyze the sentiment of the message."""
        return f"analysis of {text!r} at depth {depth}: positive"

    options = {
        "analyze": analyze,
        "done": ("CONVERSATION_OVER", "pick when there is nothing left to do"),
        "escalate": ("Hand the message to a person.", {"reason": str, "urgency": {
            "type": str, "options": ["low", "high"]}}),
    }
    runtime = ScriptedRuntime([
        'I will analyze it: {"call": "analyze", "args": {"text": "I love it", "depth": "two"}}',
        '```json\n{"call": "analyze", "args": {"text": "I love it", "depth": 2}}\n```',
    ])
    prompt = "Pick one way to handle this message: 'I love it'"
    return prompt, options, runtime


def tour() -> int:
    from . import decision
    prompt, options, runtime = _example()
    print(f"Prompt and menu sent to the model:\n\n{prompt}\n\n{decision.render_options(options)}\n")
    result = decision.make(prompt, options, runtime=runtime)
    print(decision.last_trace().format_text())
    print(f"\nThe decision resolved to: {result!r}")
    return 0


def steps() -> int:
    from . import decision
    prompt, options, runtime = _example()
    decision.make(prompt, options, runtime=runtime)
    print(decision.steps(decision.last_trace(), options).format_text())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m openprogram")
    parser.add_argument("command", choices=["tour", "steps"],
                        help="tour: one scripted decision, traced; steps: the same decision "
                             "stage by stage")
    args = parser.parse_args(argv)
    return {"tour": tour, "steps": steps}[args.command]()


if __name__ == "__main__":
    sys.exit(main())
