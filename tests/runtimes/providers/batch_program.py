"""Run by test_batch.py in a child process that the test kills while its batch is in flight:
an evaluation on the batch path with a journal. argv: provider, base_url, journal path, rows."""
import sys

from fakeserver import FAKE_KEY
from test_batch import OPTIONS, ROWS

from openprogram.evaluation.evaluate import evaluate
from openprogram.runtimes import AnthropicRuntime, OpenAIRuntime

provider, base_url, journal, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
cls = OpenAIRuntime if provider == "openai" else AnthropicRuntime
evaluate("Message: {m}", OPTIONS, ROWS[:n], progress=False, journal=journal,
         runtime=cls(model="test-model", base_url=base_url, api_key=FAKE_KEY, max_retries=0),
         batch={"poll_s": 0.05, "settle_s": 0.05})
