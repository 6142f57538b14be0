"""What a decision leaves behind, below the mechanism that makes it: the frozen records each step
makes (`records`: `Attempt`, `ToolRound`, `Pick`, `Reask`, `Repair`), the trace assembled from the
events the loop emits, with its observers (`decision_trace`: `DecisionTrace`, `TraceEvent`,
`observe`), and the trace as plain, escaped HTML from the standard library (`view`), which
`_repr_html_`, static exports and the notebook layer's panel all show. The trace changes only
through `DecisionTrace._apply`, one event at a time; the layers above reach it through its public
names.
"""
