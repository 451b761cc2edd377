"""The release version for Bazel rules whose output names carry it (the
wheel, the Debian package, the installed library's file name and SONAME).

common/version.h is the one the code reads; //packaging:version_test fails
when the two differ.
"""

QR_VERSION = "0.1.0"

# The C ABI's major version: the SONAME is libquickreduce.so.<QR_SOVERSION>.
# It changes when comm/quickreduce.h changes incompatibly, not with every
# release.
QR_SOVERSION = "0"
