# %% [markdown]
# # Play the model: a classroom playground
#
# In the playground **you** are the model. The prompt and the menu are what a model would receive;
# type a reply, press **Run**, and watch the mechanism extract the JSON, validate it, re-ask when it
# cannot be used, and resolve the pick into a result. A re-ask waits for your next reply: type it and
# press Run again. **Reset** starts over.

# %%
# %load_ext openprogram
from openprogram.widgets.playground import Playground

def book_table(guests: int, time: str, terrace: bool = False) -> str:
    """Book a table at the restaurant."""
    return f"table for {guests} at {time}" + (" on the terrace" if terrace else "")

def answer(text: str, user_id: str = "") -> str:
    """Answer the guest's question."""
    return f"answered {user_id}: {text}"

answer.input_meta = {"user_id": {"hidden": True}}

options = {
    "book_table": book_table,
    "answer": answer,
    "waitlist": ("WAITLISTED", "pick when the restaurant is full"),
    "order": ("Take a takeaway order.", {
        "items": [{"dish": str, "quantity": int}],
        "pickup": {"type": str, "options": ["18:00", "19:00", "20:00"]},
    }),
}
prompt = "A guest writes: 'Can we be four tonight at 8, outside if possible?' Pick the next step."

# %%
playground = Playground(options, prompt=prompt, context={"user_id": "guest-7"})
playground

# %% [markdown]
# ## Exercises
#
# 1. **Resolve at once.** Write a reply that books the table. What is the result, and which fields did
#    you have to write?
# 2. **Meet every error kind.** Write replies that produce `no_action`, `unknown_call`, `bad_args`,
#    `missing_required`, `type_mismatch` and `enum_violation`. For each, read the re-ask prompt the
#    panel shows: would it help a model fix its reply?
# 3. **Think aloud.** Write a reply that first quotes an example `{"call": "waitlist"}` and then
#    picks `book_table`. Which one wins, and what does the panel say about candidates? Why is the
#    *last* one the pick?
# 4. **Try to cheat.** Pick `answer` and write a `user_id` yourself. What happens to it, and where
#    does the value that reaches the function come from?
# 5. **Fill a structure.** Take a takeaway order of two dishes for 19:00. What does the result look
#    like, and who decides its shape?
# 6. **Design.** Change one description in `options` so that a reply you wrote in exercise 1 would
#    more likely pick something else. Re-run the cell that builds the playground.
#
# The cell below plays exercise 3 and 4 without typing, so you can check your answers.

# %%
demo = Playground(options, prompt=prompt, context={"user_id": "guest-7"})
print(demo.run('Maybe {"call": "waitlist"}? No - there is room: {"call": "book_table", "args": {"guests": 4, "time": "20:00", "terrace": true}}'))
attempt = demo.panel.trace.attempts[-1]
print("candidates:", attempt.candidates, "| picked:", attempt.chosen)

# %%
demo.reset()
print(demo.run('{"call": "answer", "args": {"text": "See you at 8!", "user_id": "admin"}}'))
print("dropped:", demo.panel.trace.attempts[-1].dropped)
