"""What the Ray tests share: an option set, the rows to decide on, a scripted model that answers
each row by what it holds (some rows need a re-ask, some never give a valid pick), and runtime
factories. The factories are module-level functions (and `functools.partial`s of them), so
Ray's workers import this module by name from the PYTHONPATH the tests' Ray instance is started
with, as a user's own module would be."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

TEMPLATE = "Ticket {id}: {message}\nPick the next step."


def refund(amount: float) -> str:
    """Refund the customer an amount."""
    return f"refunded {amount:.2f}"


OPTIONS = {
    "refund": refund,
    "escalate": ("ESCALATE", "hand the ticket to a person"),
    "close": ("CLOSED", "nothing more to do"),
}


def rows(n: int) -> list[dict]:
    """`n` tickets; `expected` is the option the scripted model picks in the end."""
    out = []
    for k in range(n):
        kind = ["refund", "escalate", "close"][k % 3]
        out.append({"id": k, "message": f"case {k} wants {kind}", "expected": kind})
    return out


def ticket_of(prompt: str) -> int:
    return int(re.search(r"Ticket (\d+):", prompt).group(1))


def reply_for(prompt: str) -> str:
    """The scripted model: every 7th ticket's first reply holds no pick (the re-ask gets a valid
    one), every 11th never gives a valid pick, the rest pick what their message says."""
    k = ticket_of(prompt)
    again = "could not be used as a decision" in prompt
    if k % 11 == 0:
        return "I am not sure what to do."
    if k % 7 == 0 and not again:
        return "Let me think about it."
    kind = ["refund", "escalate", "close"][k % 3]
    pick = {"call": kind, "args": {"amount": k / 4}} if kind == "refund" else {"call": kind}
    return "Done.\n```json\n" + json.dumps(pick) + "\n```"


def scripted(latency: float = 0.0):
    """The factory of the scripted model (a ScriptedRuntime answering by `reply_for`)."""
    from openprogram.runtimes import ScriptedRuntime
    return ScriptedRuntime(rule=reply_for, latency=latency)


def dying(marker: str, at: int):
    """The scripted model, except that the first worker to meet ticket `at` dies there (the
    whole process ends, mid-batch); `marker` is created once, so its replacement lives."""
    from openprogram.runtimes import ScriptedRuntime

    def rule(prompt: str) -> str:
        if ticket_of(prompt) == at:
            try:
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
                os._exit(1)
        return reply_for(prompt)
    return ScriptedRuntime(rule=rule)


def noted(folder: str, build):
    """`build()`, with a file in `folder` naming this process and the runtime built: how a test
    counts the runtimes each worker made."""
    rt = build()
    with open(os.path.join(folder, f"{os.getpid()}-{id(rt)}"), "w") as f:
        f.write(type(rt).__name__)
    return rt


def openai_at(base_url: str):
    from openprogram.runtimes import OpenAIRuntime
    return OpenAIRuntime(model="m", base_url=base_url, api_key="sk-test-not-a-key",
                         max_retries=0, stream=False)


def local_model():
    from openprogram.runtimes import LlamaCppRuntime
    return LlamaCppRuntime(seed=0, max_tokens=64)


def last_user_text(body: dict) -> str:
    """The text of the last message a chat-completions request carries (a tool result's too)."""
    msg = body["messages"][-1]
    content = msg.get("content") or ""
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content


class PerSecond:
    """A loopback server's responder that answers like the scripted model, but refuses with 429
    (retry after 200 ms) every request beyond `n` in the last second, by its own clock."""

    def __init__(self, n: int):
        import threading
        self.n, self.seen, self.refused = n, [], 0
        self.lock = threading.Lock()

    def __call__(self, body: dict):
        import time

        from fakeserver import status, text
        now = time.monotonic()
        with self.lock:
            while self.seen and self.seen[0] <= now - 1.0:
                self.seen.pop(0)
            if len(self.seen) >= self.n:
                self.refused += 1
                return status(429, "slow down", headers={"retry-after-ms": "200"},
                              err_type="rate_limit_error")
            self.seen.append(now)
        return text(reply_for(last_user_text(body)))


def cached(path: str):
    """The scripted model behind a `CachedRuntime` on `path`, a file every worker shares."""
    from openprogram.runtimes import CachedRuntime
    return CachedRuntime(scripted(), path)


def ray_processes() -> list[tuple[int, str]]:
    """(pid, command line) of every Ray process below this one (raylet, GCS, workers)."""
    parent: dict[int, int] = {}
    command: dict[int, str] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        parent[int(d)] = int(stat[stat.rindex(")") + 2:].split()[1])
        command[int(d)] = cmd
    me = os.getpid()

    def below(pid: int) -> bool:
        seen = set()
        while pid in parent and pid not in seen:
            seen.add(pid)
            pid = parent[pid]
            if pid == me:
                return True
        return False
    return [(p, c[:80]) for p, c in command.items()
            if below(p) and ("ray" in c or "gcs_server" in c)]


def end_ray_processes() -> None:
    """End what a Ray start that failed left behind (ray.shutdown() does not stop the node
    processes of a start that timed out): SIGTERM, then SIGKILL what is still there."""
    import signal
    import time
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, _ in ray_processes():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        for _ in range(20):
            if not ray_processes():
                return
            time.sleep(0.5)


def start_ray(pythonpath: str) -> None:
    """`ray.init(num_cpus=2)` as the tests and bench_ray start it: loopback only, quiet, its
    workers finding `pythonpath`. On this shared 2-core machine a loaded moment can make Ray's
    start miss its own deadlines (the raylet waits 30 s for its agent, the driver 30 s for the
    raylet): the agent's wait is raised, and a start that timed out is made again (twice)."""
    import ray
    # loopback only: Ray's token authentication has nothing to protect here
    env = {"RAY_AUTH_MODE": "disabled", "RAY_agent_register_timeout_ms": "120000",
           "RAY_worker_register_timeout_seconds": "120"}
    for k, v in env.items():
        os.environ.setdefault(k, v)
    for attempt in range(3):
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"PYTHONPATH": pythonpath, **env}})
            break
        except Exception as exc:
            ray.shutdown()
            end_ray_processes()
            if "timed out during startup" not in str(exc) or attempt == 2:
                raise
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
