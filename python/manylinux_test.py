#!/usr/bin/env python3
"""manylinux.py's policy checks on made-up requirements (each limit, in both
directions), then the real wheel: every ELF file in it fits the tag it
carries, and that tag is the oldest that fits.
  manylinux_test.py <wheel>"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import manylinux  # noqa: E402

WHEEL = None
BASE = {"GLIBC_2.2.5", "GLIBC_2.34", "GLIBCXX_3.4.29", "CXXABI_1.3.13", "GCC_3.0"}
NEEDED = ["libstdc++.so.6", "libm.so.6", "libgcc_s.so.1", "libc.so.6", "ld-linux-x86-64.so.2"]
TAG = "manylinux_2_34_x86_64"


class PolicyTest(unittest.TestCase):

    def test_what_the_native_files_need_fits_2_34_and_not_2_31(self):
        self.assertEqual(manylinux.violations(TAG, BASE, NEEDED), [])
        bad = manylinux.violations("manylinux_2_31_x86_64", BASE, NEEDED)
        self.assertTrue(any("GLIBC_2.34" in b for b in bad), bad)
        self.assertTrue(any("GLIBCXX_3.4.29" in b for b in bad), bad)
        self.assertEqual(manylinux.oldest_fitting(BASE, NEEDED), TAG)

    def test_each_prefix_beyond_the_tag_is_refused(self):
        for extra in ["GLIBC_2.35", "GLIBCXX_3.4.30", "CXXABI_1.3.14", "GCC_12.0.0",
                      "GLIBC_ABI_DT_RELR"]:
            bad = manylinux.violations(TAG, BASE | {extra}, NEEDED)
            self.assertEqual(len(bad), 1, (extra, bad))
            self.assertIn(extra, bad[0])

    def test_a_library_outside_the_whitelist_is_refused(self):
        for lib in ["libcudart.so.12", "libspdlog.so.1.10", "libfmt.so.9", "libcuda.so.1"]:
            bad = manylinux.violations(TAG, BASE, NEEDED + [lib])
            self.assertEqual(bad, ["NEEDED %s (not a library the tag lets a wheel assume)" % lib])
        self.assertIsNone(manylinux.oldest_fitting(BASE, NEEDED + ["libcudart.so.12"]))

    def test_a_newer_need_moves_the_oldest_tag(self):
        self.assertEqual(manylinux.oldest_fitting(BASE | {"GLIBC_2.36"}, NEEDED),
                         "manylinux_2_36_x86_64")
        self.assertEqual(manylinux.oldest_fitting({"GLIBC_2.17", "GLIBCXX_3.4.19"}, NEEDED),
                         "manylinux_2_17_x86_64")

    def test_readelf_sees_the_needs_of_this_interpreter(self):
        # A real ELF file of the machine: the parser finds glibc versions and NEEDED.
        versions, needed = manylinux.requirements(os.path.realpath(sys.executable))
        self.assertTrue(any(v.startswith("GLIBC_2.") for v in versions), versions)
        self.assertIn("libc.so.6", needed)


class WheelTest(unittest.TestCase):

    def test_the_wheel(self):
        errors, summary = manylinux.check_wheel(WHEEL)
        print(summary)
        self.assertEqual(errors, [])
        self.assertIn("3 ELF files", summary)  # the library, qr-broker, qrctl


if __name__ == "__main__":
    WHEEL = sys.argv.pop(1)
    unittest.main(verbosity=2)
