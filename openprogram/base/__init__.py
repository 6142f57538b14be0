"""What every stage of a decision shares, at the bottom of the core: the error family (`errors`),
how text is cut and values written for people (`text`), the JSON form of a value (`json_form`), a
line of the JSON Lines files the library appends to (`jsonl`), secrets and the masking of them in
every file and decoded pick (`secrets`), what the mechanism needs of a model without knowing the
`Runtime` class (`model_protocol`: `ModelResponse`, `ToolCall`, the `ModelCaller` protocol, the
bound runtime and Agent, time budgets), names loaded on first use (`lazy`) and the names the
public signatures are typed with (`type_names`). It imports nothing of the packages above it;
import from its modules directly.
"""
