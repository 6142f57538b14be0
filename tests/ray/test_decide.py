"""`openprogram.ray.decide` on a local Ray: the same rows, columns and outcomes as `evaluate`, a
killed worker, the limit one actor holds for every worker, a real model per worker, and the bad
inputs named before a job starts."""
from __future__ import annotations

import functools
import json
import os
import threading

import pytest
import rayhelp
from rayhelp import OPTIONS, TEMPLATE, rows

from openprogram import UsageError, evaluate
from openprogram.base.json_form import json_ready
from openprogram.evaluation.ratelimit import RateLimit

pytestmark = pytest.mark.usefixtures("ray_local")


def by_id(ds):
    """The output rows as dicts, by ticket id; fails on a row that is there twice."""
    out = {}
    for r in ds.take_all():
        assert r["id"] not in out, f"ticket {r['id']} is in the output twice"
        out[r["id"]] = r
    return out


def test_2000_rows_through_decide_equal_evaluate_on_the_same_rows():
    """Two workers, eight rows at a time each: every row's pick, result, status and attempts
    are evaluate's, every row has one schema whether it resolved or failed, and the job's
    output read back is an EvaluationResult with evaluate's accuracy and confusion."""
    import ray

    from openprogram import ray as opray
    data = rows(2000)
    got = opray.decide(ray.data.from_items(data), TEMPLATE, OPTIONS, runtime=rayhelp.scripted,
                       workers=2, concurrency=8, batch_size=250).materialize()
    want = evaluate(TEMPLATE, OPTIONS, data, runtime=rayhelp.scripted(), progress=False,
                    expected="expected")
    out = by_id(got)
    assert sorted(out) == list(range(2000))
    for k, r in out.items():
        assert r["chosen"] == want.picks[k], k
        assert r["status"] == want.statuses[k], k
        assert r["attempts"] == len(want.traces[k].attempts), k
        assert (json.loads(r["result"]) if r["result"] is not None else None) == \
            json_ready(want.results[k]), k
        assert r["message"] == data[k]["message"]   # the row's own columns are kept
    failed = sorted(k for k, r in out.items() if r["status"] == "failed")
    assert failed == [k for k in range(2000) if k % 11 == 0]
    assert {out[k]["error_kind"] for k in failed} == {"no_action"}
    assert all(out[k]["attempts"] == 2 for k in range(2000) if k % 7 == 0)
    # one schema for every row, whether it resolved or failed
    assert got.schema().names == ["id", "message", "expected", *opray.OUTPUT_COLUMNS]
    blocks = ray.get(got.to_arrow_refs())
    assert all(b.schema.equals(blocks[0].schema) for b in blocks)
    assert all(b.schema.field("chosen").type == "string" for b in blocks)
    failed, fine = out[0], out[1]
    assert failed["chosen"] is None and failed["error"].startswith("DecisionError: ")
    assert fine["error"] is None and fine["error_kind"] is None
    trace = json.loads(failed["trace"])
    assert [a["reply"] for a in trace["attempts"]] == ["I am not sure what to do."] * 2
    back = opray.result(got.sort("id"), OPTIONS, expected="expected", template=TEMPLATE)
    assert back.picks == want.picks and back.statuses == want.statuses
    assert back.accuracy == want.accuracy and back.retry_rate == want.retry_rate
    assert back.confusion.equals(want.confusion)
    assert back.error_counts.equals(want.error_counts)
    assert back.traces[7].attempts[1].chosen == "escalate"
    assert back.results[1] == "ESCALATE" and back.results[2] == "CLOSED"


def test_a_worker_killed_mid_job_leaves_every_row_in_the_output_exactly_once(tmp_path):
    """The worker that meets ticket 200 dies mid-batch (its process exits); Ray starts another
    and runs that batch again: every ticket is in the output once, decided."""
    import ray

    from openprogram import ray as opray
    marker = str(tmp_path / "died")
    got = opray.decide(ray.data.from_items(rows(400)), TEMPLATE, OPTIONS,
                       runtime=functools.partial(rayhelp.dying, marker, 200),
                       workers=2, batch_size=40).materialize()
    assert os.path.exists(marker)   # it did die
    out = by_id(got)
    assert sorted(out) == list(range(400))
    assert out[200]["status"] == "resolved" and out[200]["chosen"] == "close"
    assert sum(r["status"] == "failed" for r in out.values()) == len(range(0, 400, 11))


def test_a_repeated_job_with_a_cached_runtime_pays_only_for_new_rows(tmp_path):
    """Two workers share one cache file (evaluate's request keys): the second job, over the same
    rows and ten new ones, answers the first job's rows from the file and asks only the new."""
    import ray

    from openprogram import ray as opray
    factory = functools.partial(rayhelp.cached, str(tmp_path / "cache.jsonl"))
    data = [r for r in rows(44) if r["id"] % 11 and r["id"] % 7]    # one attempt each
    first = by_id(opray.decide(ray.data.from_items(data[:24]), TEMPLATE, OPTIONS,
                               runtime=factory, workers=2, batch_size=6))
    again = by_id(opray.decide(ray.data.from_items(data), TEMPLATE, OPTIONS, runtime=factory,
                               workers=2, batch_size=6))
    assert not any(r["cached"] for r in first.values())
    assert {k for k, r in again.items() if r["cached"]} == set(first)
    assert all(again[k]["chosen"] == first[k]["chosen"] for k in first)
    lines = (tmp_path / "cache.jsonl").read_text().splitlines()
    assert len(lines) == 1 + len(data)    # its header, then one line per request, never twice


@pytest.mark.slow
def test_300_rows_against_the_loopback_server_with_a_25_per_second_limit_all_resolve(tmp_path):
    """The server allows 25 requests in any second and answers 429 to more; the job is given
    that limit once. Two workers send through the one actor that holds it, so the cluster
    keeps to it: every row resolves, and the server had to refuse almost nothing (two workers
    each keeping 25 a second would send twice that)."""
    import ray
    from fakeserver import FakeServer

    from openprogram import ray as opray
    answer = rayhelp.PerSecond(25)
    folder = tmp_path / "built"
    folder.mkdir()
    with FakeServer("openai", responder=answer) as server:
        factory = functools.partial(rayhelp.noted, str(folder),
                                    functools.partial(rayhelp.openai_at, server.base_url))
        got = opray.decide(ray.data.from_items([r for r in rows(330) if r["id"] % 11][:300]),
                           TEMPLATE, OPTIONS, runtime=factory, workers=2, concurrency=8,
                           batch_size=25, rate_limit=RateLimit(requests_per_minute=25 * 60))
        out = by_id(got.materialize())
    assert len(out) == 300 and all(r["status"] == "resolved" for r in out.values())
    assert len({name.split("-")[0] for name in os.listdir(folder)}) == 2   # two workers sent
    asked = sum(r["attempts"] for r in out.values())
    assert len(server.requests) == asked + answer.refused
    assert answer.refused <= 15, f"{answer.refused} requests were refused with 429"


@pytest.mark.slow
def test_20_rows_on_the_bundled_llama_cpp_model_one_model_per_worker(tmp_path):
    """The factory loads SmolLM2 in each worker once; the grammar of mode="json_schema" makes
    every reply a pick, so every row's decision reads one (it may still pick badly)."""
    import ray

    from openprogram import ray as opray
    folder = tmp_path / "built"
    folder.mkdir()
    got = opray.decide(ray.data.from_items(rows(20)), TEMPLATE, OPTIONS,
                       runtime=functools.partial(rayhelp.noted, str(folder),
                                                 rayhelp.local_model),
                       workers=2, concurrency=1, batch_size=5, mode="json_schema",
                       num_cpus=0.5).materialize()
    out = by_id(got)
    assert sorted(out) == list(range(20))
    built = os.listdir(folder)
    pids = {name.split("-")[0] for name in built}
    assert len(built) == len(pids) <= 2, built   # one model per worker process
    for r in out.values():
        trace = json.loads(r["trace"])
        assert trace["runtime"] and trace["mode"] == "json_schema"
        for a in trace["attempts"]:
            assert a["found_in"] == "schema", a["reply"]
            assert a["error_kind"] not in ("no_action", "not_text", "model_error"), a
        assert r["tokens_out"] > 0


# -- bad input, named before the job starts -------------------------------------------------------


def test_a_runtime_instead_of_a_factory_is_refused_naming_factory():
    import ray

    from openprogram import ray as opray
    with pytest.raises(UsageError, match="factory"):
        opray.decide(ray.data.from_items(rows(3)), TEMPLATE, OPTIONS,
                     runtime=rayhelp.scripted())


def test_a_dataset_without_the_templates_columns_is_refused_before_the_job():
    import ray

    from openprogram import ArgumentError
    from openprogram import ray as opray
    ds = ray.data.from_items([{"id": 1, "text": "hello"}])
    with pytest.raises(ArgumentError, match=r"\{message\}.*'message'.*'id', 'text'"):
        opray.decide(ds, TEMPLATE, OPTIONS, runtime=rayhelp.scripted)


def test_settings_ray_cannot_carry_are_named():
    import ray

    from openprogram import ray as opray
    held = threading.Lock()

    def rule(pick):
        with held:
            return True
    with pytest.raises(UsageError, match="validate= cannot be carried"):
        opray.decide(ray.data.from_items(rows(3)), TEMPLATE, OPTIONS,
                     runtime=rayhelp.scripted, validate=rule)
    with pytest.raises(UsageError, match="journal="):
        opray.decide(ray.data.from_items(rows(3)), TEMPLATE, OPTIONS,
                     runtime=rayhelp.scripted, journal="x.jsonl")
    with pytest.raises(UsageError, match="model="):
        opray.decide(ray.data.from_items(rows(3)), TEMPLATE, OPTIONS,
                     runtime=rayhelp.scripted, model="gpt")
    with pytest.raises(Exception, match="max_retries"):
        opray.decide(ray.data.from_items(rows(3)), TEMPLATE, OPTIONS,
                     runtime=rayhelp.scripted, max_retries=-1)
