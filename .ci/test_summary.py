#!/usr/bin/env python3
"""Prints 'N passed, N failed' from bazel-testlogs/**/test.xml.

gtest binaries write one <testcase> per test (Bazel passes XML_OUTPUT_FILE);
other tests get Bazel's one-case XML. --extra-passed/--extra-failed add the
CI's own checks (layering greps, flavour builds) to the count.
"""
import argparse
import glob
import os
import xml.etree.ElementTree as ET


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--testlogs", default="bazel-testlogs")
    ap.add_argument("--extra-passed", type=int, default=0)
    ap.add_argument("--extra-failed", type=int, default=0)
    args = ap.parse_args()
    passed, failed, skipped = args.extra_passed, args.extra_failed, 0
    for path in glob.glob(os.path.join(args.testlogs, "**", "test.xml"), recursive=True):
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError:
            failed += 1  # a test that died mid-write
            continue
        cases = list(root.iter("testcase"))
        for tc in cases:
            if tc.find("failure") is not None or tc.find("error") is not None:
                failed += 1
            elif tc.find("skipped") is not None or tc.get("result") == "skipped" or \
                    tc.get("status") == "notrun":
                skipped += 1
            else:
                passed += 1
    if skipped:
        print(f"{skipped} skipped (GTEST_SKIP)")
    print(f"{passed} passed, {failed} failed")


if __name__ == "__main__":
    main()
