"""The per-replica result cache: LRU bound, single-flight, infra errors never cached."""

import asyncio

import pytest

from drkernel.config.verifier import VerifyOptions
from drkernel.types.verify_result import ErrorInfo, VerifyResult
from serve_apps.result_cache import ResultCache, content_key


def test_reward_is_not_an_option_so_it_never_splits_the_cache():
    with pytest.raises(ValueError, match="reward"):
        VerifyOptions(reward={"speedup_cap": 2.0})


def test_key_changes_with_every_input():
    base = content_key("ref", "cand", VerifyOptions())
    assert base == content_key("ref", "cand", VerifyOptions())
    assert base != content_key("ref2", "cand", VerifyOptions())
    assert base != content_key("ref", "cand2", VerifyOptions())
    assert base != content_key("ref", "cand", VerifyOptions(num_perf_trials=7))
    # no ambiguity from concatenation
    assert content_key("ab", "c", VerifyOptions()) != content_key("a", "bc", VerifyOptions())


def _ok(n) -> VerifyResult:
    return VerifyResult(compiled=True, correct=True, details={"n": n})


def test_repeats_are_hits_and_capacity_is_bounded():
    async def main():
        cache = ResultCache(capacity=2)
        calls = []

        async def compute(n):
            calls.append(n)
            return _ok(n)

        for key in ("a", "b", "a", "c", "b"):  # a is used again, so c evicts b, then b evicts a
            await cache.get_or_compute(key, lambda k=key: compute(k))
        assert calls == ["a", "b", "c", "b"]
        assert len(cache) == 2
        assert (cache.hits, cache.misses) == (1, 4)

    asyncio.run(main())


def test_identical_requests_in_flight_share_one_evaluation():
    async def main():
        cache = ResultCache(capacity=8)
        started = 0
        release = asyncio.Event()

        async def compute():
            nonlocal started
            started += 1
            await release.wait()
            return _ok(1)

        waiters = [asyncio.create_task(cache.get_or_compute("k", compute)) for _ in range(5)]
        await asyncio.sleep(0.01)
        release.set()
        out = await asyncio.gather(*waiters)
        assert started == 1
        assert sorted(hit for _, hit in out) == [False, True, True, True, True]
        assert all(r.details == {"n": 1} for r, _ in out)
        out[0][0].details["n"] = 99  # callers get copies: mutating one never changes the cache
        again, hit = await cache.get_or_compute("k", compute)
        assert hit and again.details == {"n": 1}

    asyncio.run(main())


def test_a_cancelled_caller_does_not_cancel_the_shared_evaluation():
    async def main():
        cache = ResultCache(capacity=8)
        release = asyncio.Event()

        async def compute():
            await release.wait()
            return _ok(3)

        first = asyncio.create_task(cache.get_or_compute("k", compute))
        second = asyncio.create_task(cache.get_or_compute("k", compute))
        await asyncio.sleep(0.01)
        first.cancel()
        release.set()
        result, hit = await second
        assert result.details == {"n": 3} and hit
        with pytest.raises(asyncio.CancelledError):
            await first

    asyncio.run(main())


def test_infra_errors_are_not_cached():
    async def main():
        cache = ResultCache(capacity=8)
        results = iter(
            [
                VerifyResult(status="infra_error", error=ErrorInfo(kind="infra", message="fork server died")),
                _ok(2),
            ]
        )

        async def compute():
            return next(results)

        first, hit1 = await cache.get_or_compute("k", compute)
        second, hit2 = await cache.get_or_compute("k", compute)
        assert first.status == "infra_error" and not hit1
        assert second.status == "ok" and not hit2 and len(cache) == 1

    asyncio.run(main())


def test_capacity_zero_disables_storage_but_not_single_flight():
    async def main():
        cache = ResultCache(capacity=0)

        async def compute():
            return _ok(1)

        await cache.get_or_compute("k", compute)
        _, hit = await cache.get_or_compute("k", compute)
        assert not hit and len(cache) == 0

    asyncio.run(main())


def test_an_evaluation_nobody_waits_for_is_cancelled_and_a_new_request_starts_afresh():
    async def main():
        cache = ResultCache(capacity=8)
        cancelled = asyncio.Event()
        runs = 0

        async def compute():
            nonlocal runs
            runs += 1
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return _ok(1)

        waiters = [asyncio.create_task(cache.get_or_compute("k", compute)) for _ in range(2)]
        await asyncio.sleep(0.01)
        waiters[0].cancel()
        await asyncio.sleep(0.01)
        assert not cancelled.is_set()  # one waiter is left
        waiters[1].cancel()
        await asyncio.wait_for(cancelled.wait(), 1)

        async def quick():
            return _ok(2)

        result, hit = await cache.get_or_compute("k", quick)
        assert result.details == {"n": 2} and not hit and runs == 1

    asyncio.run(main())


def test_timeouts_are_not_cached():
    async def main():
        cache = ResultCache(capacity=8)

        async def compute():
            return VerifyResult(compiled=True, error=ErrorInfo(kind="timeout", message="exceeded 3 s"))

        await cache.get_or_compute("k", compute)
        _, hit = await cache.get_or_compute("k", compute)
        assert not hit and len(cache) == 0

    asyncio.run(main())
