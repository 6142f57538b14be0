"""Many decisions: an option set run over a table of inputs. Input tables read as workers free up
(`inputs`), the runner on threads or one event loop with Ctrl-C (`runner`), the results and their
columns (`results`: `EvaluationResult`, `ComparisonResult`), the journal that makes a run
resumable (`journal`), pacing and the pause on a rate limit (`ratelimit`), and `evaluate`,
`aevaluate`, `compare`, `acompare`, `Variant` (`evaluate`). Nothing here loads with
`import openprogram`: `openprogram.evaluate` and `decision.evaluate` import it on first use.
"""
