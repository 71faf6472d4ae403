# SPDX-License-Identifier: PostgreSQL
"""What a holder does, written once for threads and for asyncio.

The steps are generators that yield operations — a database call or a
sleep — and get their results (or their exceptions) back; the sync and the
asyncio drivers carry them out.  So the rules of waiting, renewing and
losing a lease exist in one place.
"""

import random
import time

# the pause after a call that returned at once, behind another request:
# doubling from PAUSE_MIN, at most PAUSE_MAX (which bounds how long a grant
# made between two calls waits for its collecting call)
PAUSE_MIN = 0.01
PAUSE_MAX = 0.1


class Call:
    """One dlock function call; limit: seconds it may take (None: any)."""

    __slots__ = ("op", "args", "limit")

    def __init__(self, op, args, limit=None):
        self.op, self.args, self.limit = op, args, limit


class Sleep:
    """Wait this long; the result is True when the holder was told to stop."""

    __slots__ = ("seconds",)

    def __init__(self, seconds):
        self.seconds = seconds


class CallTimedOut(Exception):
    """A call took longer than its limit (the connection may hang)."""


class Refused(Exception):
    """The server no longer has the owner's grant (DL001)."""


def lease_margin(ttl):
    """How long before the lease's end the client stops trusting it.

    Covers the clocks of client and server running at slightly different
    rates and the time the server took to answer before its clock started
    the lease (the client counts from before it sent the call)."""
    return min(0.1 * ttl, 1.0)


def acquire_steps(spec):
    """Wait for the grant in short calls that keep the place in line.

    Returns (token, sent_at): sent_at is the monotonic time from which the
    lease is counted — just before the granting call (or the one before it)
    was sent.  A pooled
    connection is busy for one short call at a time, never for the whole
    wait.  Any way out other than a grant (timeout, cancel, error) withdraws
    the request: a kept place would otherwise stay in line for ttl."""
    args = dict(spec.args)
    if spec.timeout == 0:
        sent_at = time.monotonic()
        token = yield Call(spec.try_op, args)
        return token, sent_at
    end = None if spec.timeout is None else time.monotonic() + spec.timeout
    # a kept place granted between two calls started its lease after the
    # earlier call was sent: count from there, never from a later moment
    lease_from = None
    pause = 0.0
    try:
        while True:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                break
            # at least 10 ms: the server refuses a timeout of 0
            args["timeout"] = max(0.01, spec.poll if left is None else min(spec.poll, left))
            args["keep_place"] = True
            sent_at = time.monotonic()
            token = yield Call(spec.op, args)
            if token is not None:
                return int(token), sent_at if lease_from is None else lease_from
            lease_from = sent_at
            # a call behind another request returns at once, its place kept
            # (the server waits only for the first in line): pause before the
            # next one, longer while it stays behind
            if time.monotonic() - sent_at < args["timeout"] / 2:
                pause = min(PAUSE_MAX, 2 * pause) if pause else PAUSE_MIN
                left = None if end is None else end - time.monotonic()
                nap = pause * random.uniform(0.5, 1.0)
                yield Sleep(nap if left is None else max(0.0, min(nap, left)))
            else:
                pause = 0.0
    except BaseException:
        yield from withdraw_steps(spec)
        raise
    yield from withdraw_steps(spec)  # timed out
    return None, None


def release_steps(spec):
    """Leave: by the owner key, so never a grant that is no longer ours."""
    yield from _best_effort(Call("release", {"name": spec.name, "owner": spec.owner},
                                 limit=spec.release_limit))


def withdraw_steps(spec):
    """Give up a request, a kept place or a grant of this owner key.

    With a key of our own, dlock_release_all: it also ends a call of the
    key still waiting on a connection we abandoned (a cancelled or broken
    one), which a release would not reach and which would then stay in
    line as a kept place.  A caller's own key may hold other locks: then
    only this name is released."""
    if not spec.own_key:
        yield from release_steps(spec)
        return
    yield from _best_effort(Call("release_all", {"owner": spec.owner}, limit=spec.release_limit))


def _best_effort(op):
    try:
        yield op
    except Exception:
        pass  # the lease (ttl) ends it on the server


def watch_steps(held):
    """Renew every ttl/3 until told to stop; lose the lease when a renewal
    is refused (DL001) or none succeeded before the lease could end.

    Returns a text saying why the lease was lost, or None when stopped."""
    spec = held._spec
    ttl = spec.ttl
    interval = ttl / 3.0
    retry = min(0.5, interval / 4.0)
    next_at = held._sent_at + interval
    while True:
        if (yield Sleep(max(0.0, next_at - time.monotonic()))):
            return None
        now = time.monotonic()
        if now >= held._deadline:
            return "no renewal succeeded within the lease (%.1f s)" % ttl
        sent_at = now
        try:
            yield Call("renew", {"name": spec.name, "ttl": ttl, "owner": spec.owner},
                       limit=held._deadline - now)
        except CallTimedOut:
            return "a renewal did not finish before the lease could end"
        except Refused as e:
            return "the server no longer has the lease (%s)" % e
        except Exception:
            next_at = time.monotonic() + retry  # a lost connection: again soon
            continue
        held._deadline = sent_at + ttl - lease_margin(ttl)
        next_at = sent_at + interval
