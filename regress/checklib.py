# SPDX-License-Identifier: PostgreSQL
"""What every Python test script of regress/ prints: "ok   <what>" or
"FAIL <what>: <detail>" per check, and last "<suite>: N passed, M failed"
(scripts/check.sh counts that line; a run that ends in an exception is one
failure more, and the line still comes last)."""

import sys

RESULTS = {"passed": 0, "failed": 0}


def check(what, cond, detail=""):
    RESULTS["passed" if cond else "failed"] += 1
    print(("ok   " if cond else "FAIL ") + what + ("" if cond or not detail else ": " + str(detail)))
    sys.stdout.flush()


def run(suite, main):
    try:
        main()
    except Exception as e:
        RESULTS["failed"] += 1
        print("FAIL the run ended with %r" % e)
    print("%s: %d passed, %d failed" % (suite, RESULTS["passed"], RESULTS["failed"]))
    sys.exit(1 if RESULTS["failed"] else 0)
