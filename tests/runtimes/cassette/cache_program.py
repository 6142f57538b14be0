"""Run by test_cache_processes.py in a child process: `n` requests (`prefix 0` .. `prefix n-1`)
through a CachedRuntime on the shared cache file, once the file `go` exists (so the children
write at the same time). argv: cache path, go path, prefix, n."""
import os
import sys
import time

from openprogram.runtimes import CachedRuntime, ScriptedRuntime

path, go, prefix, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rt = CachedRuntime(ScriptedRuntime(rule=lambda text: f"answer to {text.strip()}"), path)
while not os.path.exists(go):
    time.sleep(0.001)
for i in range(n):
    rt.complete([{"role": "user", "content": f"{prefix} {i}"}])
print(rt.hits, rt.misses, flush=True)
