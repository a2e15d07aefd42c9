"""Requests paced by the providers' rate-limit headers (``arag.llm.limits``): the headers
as each provider writes them, the limiter's rules on a fake clock, and the real SDKs over
HTTP against fake APIs holding a time-scaled token bucket (``tests/fake_bucket.py``).
Throughput is the bench's (``bench/rate_limits.py``), not a timed assertion here."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from omegaconf import OmegaConf

from arag.config import ModelConfig
from arag.llm import limits as paced
from arag.llm import make_model
from arag.llm.base import APIFailure, Usage
from arag.llm.limits import Demand, RateLimiter, Seeds
from arag.llm.rate_headers import ANTHROPIC, INPUT, OPENAI, REQUESTS, TOKENS, duration_s
from runners import dryrun
from runners.experiment import run
from runners.settings import read
from tests.anthropic_fake import FakeAnthropic, text_reply
from tests.conftest import ROOT
from tests.fake_bucket import TokenBucket
from tests.openai_fake import FakeOpenAI
from tests.openai_fake import text_reply as openai_reply

KEY = "sk-ant-test"
PROMPT = " ".join(f"Revenue rose {i} percent in the quarter." for i in range(30))


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_TEST_KEY", "sk-test")


def model_cfg(provider: str, url: str, **settings):
    return OmegaConf.structured(ModelConfig(
        name="m", provider=provider, model_id="claude-haiku-4-5" if provider == "anthropic"
        else "gpt-4o-mini", base_url=url, retry_base_delay_s=0.02, timeout_s=10,
        api_key_env=None if provider == "anthropic" else "OPENAI_TEST_KEY", **settings))


def ask(model, text: str = PROMPT):
    return model.complete("You summarize.", [{"role": "user", "content": text}], max_tokens=64)


# the headers, as each provider writes them ---------------------------------------------

def test_anthropic_headers_read_as_separate_budgets_with_rfc3339_resets():
    now = 1_764_621_000.0  # 2025-12-01T20:30:00Z
    reading = ANTHROPIC.read({
        "anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-requests-reset": "2025-12-01T20:30:01Z",
        "Anthropic-RateLimit-Input-Tokens-Limit": "400000",
        "anthropic-ratelimit-input-tokens-remaining": "100000",
        "anthropic-ratelimit-input-tokens-reset": "2025-12-01T20:30:45.500Z",
        "anthropic-ratelimit-output-tokens-limit": "80000",
        "anthropic-ratelimit-output-tokens-remaining": "not a number",
        "anthropic-ratelimit-output-tokens-reset": "2025-12-01T20:30:10Z"}, now)
    assert reading is not None
    assert set(reading.budgets) == {REQUESTS, INPUT}  # a malformed budget is left out
    told = reading.budgets[INPUT]
    assert (told.limit, told.remaining) == (400_000, 100_000)
    assert told.reset_s == pytest.approx(45.5)
    assert reading.budgets[REQUESTS].reset_s == pytest.approx(1.0)
    assert ANTHROPIC.read({"content-type": "application/json"}, now) is None
    assert ANTHROPIC.read(None, now) is None


def test_openai_headers_read_as_one_token_budget_with_duration_resets():
    reading = OPENAI.read({"x-ratelimit-limit-requests": "10000",
                           "x-ratelimit-remaining-requests": "9999",
                           "x-ratelimit-reset-requests": "6ms",
                           "x-ratelimit-limit-tokens": "2000000",
                           "x-ratelimit-remaining-tokens": "1500000",
                           "x-ratelimit-reset-tokens": "6m0s"}, 0.0)
    assert reading is not None and set(reading.budgets) == {REQUESTS, TOKENS}
    assert reading.budgets[TOKENS].reset_s == 360.0
    assert reading.budgets[REQUESTS].reset_s == pytest.approx(0.006)
    assert [duration_s(d) for d in ("1h2m3s", "1.5s", "20ms", "2")] == [3723, 1.5, 0.02, 2]
    with pytest.raises(ValueError):
        duration_s("soon")


# the limiter's rules, on a fake clock --------------------------------------------------

class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def demand(tokens: int, max_tokens: int = 0) -> Demand:
    return Demand(lambda: tokens, max_tokens)


def test_configured_limits_hold_requests_and_tokens_per_minute():
    clock = Clock()
    limiter = RateLimiter(Seeds(requests_per_minute=2), clock=clock, sleep=clock.sleep)
    for _ in range(2):
        limiter.settle(limiter.acquire(demand(10)), {}, None)
    limiter.acquire(demand(10))  # the bucket's third request waits for its refill
    assert clock.now >= 30 * (1 - paced.KEPT)  # 2 a minute: one every 30 s
    tokens = RateLimiter(Seeds(tokens_per_minute=1000), clock=clock, sleep=clock.sleep)
    start = clock.now
    ticket = tokens.acquire(demand(700, max_tokens=100))  # prompt + max_tokens: 800
    tokens.settle(ticket, paced.counted(Usage(700, 100), None), None)
    tokens.acquire(demand(700, max_tokens=100))
    assert clock.now - start >= 60 * (800 - 200 + 50) / 1000 * 0.99  # 650 more to refill


def test_a_request_larger_than_the_whole_limit_waits_for_a_full_bucket_and_goes_alone():
    clock = Clock()
    limiter = RateLimiter(Seeds(input_tokens_per_minute=1000), clock=clock, sleep=clock.sleep)
    small = limiter.acquire(demand(300))
    released = []

    def settle_later():
        time.sleep(0.2)
        clock.now += 1
        released.append(clock.now)
        limiter.settle(small, {INPUT: 300.0}, None)

    threading.Thread(target=settle_later).start()
    limiter.acquire(demand(5000))
    assert released and limiter.in_flight == 1  # sent after the small one was answered
    assert limiter.buckets[INPUT].level_at(clock.now) < 0  # it took a full bucket and more


def test_headers_replace_the_configured_limits_and_others_spending_is_learned():
    clock = Clock()
    limiter = RateLimiter(Seeds(input_tokens_per_minute=1_000_000), clock=clock,
                          sleep=clock.sleep)
    ticket = limiter.acquire(demand(1000))
    told = ANTHROPIC.read({"anthropic-ratelimit-input-tokens-limit": "60000",
                           "anthropic-ratelimit-input-tokens-remaining": "0",
                           "anthropic-ratelimit-input-tokens-reset": "1970-01-01T00:01:00Z"},
                          0.0)
    limiter.settle(ticket, {INPUT: 1000.0}, told)
    bucket = limiter.buckets[INPUT]
    assert bucket.limit == 60_000 and bucket.rate == pytest.approx(1000)  # full in 60 s
    limiter.acquire(demand(1000))  # waits for 1,000 + the kept 3,000 to refill
    assert clock.now == pytest.approx(4.0, rel=0.02)


def test_a_429_holds_others_for_its_retry_after_halves_the_slots_and_spares_its_own_retry():
    clock = Clock()
    limiter = RateLimiter(clock=clock, sleep=clock.sleep)
    tickets = [limiter.acquire(demand(10)) for _ in range(8)]  # no limit known: all at once
    assert clock.now == 0 and limiter.slots is None
    until = limiter.failed(tickets[0], APIFailure("rate_limit", "slow down", True, 7.0), None)
    for t in tickets[1:4]:  # 429s of the same round: news once
        limiter.failed(t, APIFailure("rate_limit", "slow down", True, 7.0), None)
    assert limiter.slots == 4.0 and limiter.totals.rate_limited == 4
    for t in tickets[4:]:  # answers give slots back one by one (AIMD)
        limiter.settle(t, {}, None)
    assert 4.0 < limiter.slots < 5.0
    limiter.acquire(demand(10), waited_until=until)  # its own retry waited in the retry loop
    assert clock.now == 0
    limiter.acquire(demand(10))  # anyone else waits the hold out
    assert clock.now >= 7


# the real SDKs over HTTP ---------------------------------------------------------------

def in_flight_peak(server, threads: int, make) -> int:
    """The most requests the server held at once while ``threads`` threads asked: each
    request is held until all of them arrived (or 10 s passed)."""
    lock, current, peak = threading.Lock(), [0], [0]
    everyone = threading.Barrier(threads)
    answer = server.handler

    def held(request, n):
        with lock:
            current[0] += 1
            peak[0] = max(peak[0], current[0])
        try:
            everyone.wait(timeout=10)
        except threading.BrokenBarrierError:
            pass
        with lock:
            current[0] -= 1
        return answer(request, n)

    server.handler = held
    model = make()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda _: ask(model), range(threads)))
    return peak[0]


@pytest.mark.parametrize("provider", ["anthropic", "openai-compatible"])
def test_a_server_without_rate_limit_headers_is_asked_as_before(provider):
    fake_class = FakeAnthropic if provider == "anthropic" else FakeOpenAI
    reply = text_reply if provider == "anthropic" else openai_reply
    with fake_class(lambda r, n: reply("ok", r)) as server:
        before = paced.totals()
        peak = in_flight_peak(server, 8, lambda: make_model(model_cfg(provider, server.url)))
        used = paced.totals() - before
    assert peak == 8  # every thread's request at once: concurrency alone decides
    # nothing waited for a limit (the seconds are the threads' turns at the limiter's lock)
    assert used.requests == 8 and used.rate_limited == 0 and used.wait_s < 0.5


WORKER = """
import json, sys
from concurrent.futures import ThreadPoolExecutor
from omegaconf import OmegaConf
from arag.config import ModelConfig
from arag.llm import ModelError, make_model
from arag.llm.limits import totals
cfg = OmegaConf.structured(ModelConfig(name="m", provider="anthropic", model_id="claude-haiku-4-5",
                                       base_url=sys.argv[1], retry_base_delay_s=0.02, timeout_s=10))
model = make_model(cfg)
text = " ".join(f"Revenue rose {i} percent in the quarter." for i in range(30))
def one(i):
    try:
        model.complete("You summarize.", [{"role": "user", "content": f"{i}: {text}"}],
                       max_tokens=64)
        return None
    except ModelError as exc:
        return str(exc)
with ThreadPoolExecutor(4) as pool:
    errors = [e for e in pool.map(one, range(int(sys.argv[2]))) if e]
t = totals()
print(json.dumps({"errors": errors, "requests": t.requests, "429s": t.rate_limited}))
"""


def test_two_processes_on_one_key_stay_within_its_limit():
    """Each process paces by the headers it gets, which report the account's remaining
    budget, so together they keep within it: few 429s, no task errored."""
    bucket = TokenBucket(16_000, minute_s=1.0)  # a minute in a second: ~6 minutes of work
    with FakeAnthropic(lambda r, n: {**text_reply("ok", r), "delay": 0.05},
                       bucket=bucket) as server:
        workers = [subprocess.Popen([sys.executable, "-c", WORKER, server.url, "150"], cwd=ROOT,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for _ in range(2)]
        outs = [w.communicate(timeout=300) for w in workers]
        n_requests = len(server.requests)
    results = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    assert all(w.returncode == 0 for w in workers), [err[-2000:] for _, err in outs]
    assert [r["errors"] for r in results] == [[], []]
    assert n_requests == 300 + bucket.refused
    admitted = sum(n for _, n in bucket.admitted)
    assert admitted > 3 * bucket.limit  # the limit, not the threads, set the pace
    assert bucket.refused <= 0.02 * n_requests, (bucket.refused, n_requests)
    assert sum(r["429s"] for r in results) == bucket.refused


def test_a_run_against_a_bucket_errs_no_task_and_logs_its_waits_and_429s(make_cfg, tmp_path):
    bucket = TokenBucket(6_000, minute_s=1.5)
    with FakeAnthropic(bucket=bucket) as server:
        cfg = make_cfg("system=arag", "dataset=sample", "model=claude-haiku-4-5",
                       f"model.base_url={server.url}", "model.retry_base_delay_s=0.02",
                       "runner.concurrency=8", "cache.mode=off")
        metrics = run(read(cfg))
    assert metrics["n_errors"] == 0
    assert metrics["rate_limited_429s"] == bucket.refused <= 0.02 * len(server.requests) + 1
    assert metrics["rate_limit_wait_s"] > 0  # the bucket, not the threads, set the pace


# the dry run's wall time ---------------------------------------------------------------

def test_the_dry_run_states_the_wall_time_a_known_limit_allows(make_cfg, capsys):
    cfg = make_cfg("system=naive", "dataset=sample", "dataset.limit=4", "model=claude-haiku-4-5",
                   "runner.dry_run=true", "model.input_tokens_per_minute=500")
    run(read(cfg))
    printed = capsys.readouterr().out
    tokens = int(re.search(r"~([\d,]+) input tokens", printed).group(1).replace(",", ""))
    minutes = tokens / 500 - 1  # the first minute's budget is there at the start
    assert minutes >= 1
    assert f"at 500 input tokens/min this run needs at least {math.floor(minutes):,} min" \
        in printed


def test_a_sweeps_wall_time_adds_its_jobs_on_one_account_and_a_sequential_one_gives_a_range():
    account = {"a": {"limits": {INPUT: 400_000.0, REQUESTS: 50.0}, REQUESTS: 100,
                     INPUT: 2_000_000, "output_tokens": 1000}}
    jobs = [{"run": f"r{i}", "calls": 100, "cost_usd": 1.0, "parts": {"system": 1.0},
             "tasks": 100, "paced": account} for i in range(3)]
    line = dryrun.total_line("sweep total", jobs)
    assert "at 400,000 input tokens/min this sweep needs at least 14 min" in line  # 15 - 1
    ranged = dryrun.sequential_range(jobs, batch_size=20, max_tasks=None)
    # 20 tasks of 100: 1.2M tokens, 3 min less the first; all 100: 14 min
    assert "needs at least between 2 min (stopped at the first look) and 14 min" in ranged
    assert dryrun.wall_minutes([{**jobs[0], "paced": {}}]) is None


def test_the_progress_bar_shows_the_pace_against_the_accounts_limit():
    assert paced.pace_words() is None  # nothing answered yet: nothing shown
    limiter = paced.limiter_for("anthropic", None, KEY, "claude-haiku-4-5",
                                Seeds(input_tokens_per_minute=400_000))
    limiter.settle(limiter.acquire(demand(30_000)), {INPUT: 30_000.0, TOKENS: 30_100.0}, None)
    assert paced.pace_words() == "120k/400k input tok/min"  # 30k over the first 15 s
