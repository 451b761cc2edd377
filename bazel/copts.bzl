"""Compiler options for the project's own code (third-party code gets none)."""

QR_COPTS = [
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wnon-virtual-dtor",
    "-Wno-missing-field-initializers",
]

QR_TEST_COPTS = QR_COPTS + [
    # gtest macros compare signed with unsigned freely.
    "-Wno-sign-compare",
]
