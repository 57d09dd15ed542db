"""Runs the tests and writes .test-results/int.json, which scripts/test-summary.mjs adds up.

    python3 -m tests.run      (from clients/python, with prompt_service importable)
"""

from __future__ import annotations

import json
import os
import sys
import unittest

import prompt_service


def main() -> int:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    print(f"prompt_service from {os.path.dirname(prompt_service.__file__)}", flush=True)
    suite = unittest.defaultTestLoader.discover(os.path.join(here, "tests"), top_level_dir=here)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    os.makedirs(os.path.join(here, ".test-results"), exist_ok=True)
    with open(os.path.join(here, ".test-results", "int.json"), "w", encoding="utf-8") as report:
        json.dump({"numPassedTests": passed, "numFailedTests": failed, "numPendingTests": skipped}, report)
    print(f"python client: {passed} passed, {failed} failed, {skipped} skipped")
    return 0 if result.wasSuccessful() and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
