# SPDX-License-Identifier: PostgreSQL
"""What every Python test script of regress/ (and clients/python) prints:
"ok   <what>" or "FAIL <what>: <detail>" per check, and last
"<suite>: N passed, M failed" (scripts/check.sh counts that line; a run that
ends in an exception is one failure more, and the line still comes last).

A script with one run uses check() and run().  One that counts a run of its
own (the torture runs, the scenarios, pg_regress-like reports) keeps a
Tally: the same lines and the same summary, counted in one object."""

import sys


class Tally:
    """Checks counted: .passed and .failed."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def count(self, ok):
        """Count a check; returns whether it passed."""
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        return bool(ok)

    def check(self, what, ok, detail="", sep=": ", quiet=False):
        """Count a check and print "ok   <what>", or "FAIL <what>" and, if
        there is one, <sep><detail>; quiet: print only a failure.
        Returns whether it passed."""
        if self.count(ok):
            if not quiet:
                print("ok   " + what)
        else:
            print("FAIL " + what + (sep + str(detail) if detail else ""))
        sys.stdout.flush()
        return bool(ok)

    def summary(self, suite):
        """The suite's last line: "<suite>: N passed, M failed"."""
        return "%s: %d passed, %d failed" % (suite, self.passed, self.failed)


TALLY = Tally()


def check(what, cond, detail=""):
    TALLY.check(what, cond, detail)


def run(suite, main):
    try:
        main()
    except Exception as e:
        TALLY.failed += 1
        print("FAIL the run ended with %r" % e)
    print(TALLY.summary(suite))
    sys.exit(1 if TALLY.failed else 0)
