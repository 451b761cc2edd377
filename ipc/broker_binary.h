// Where qr-broker is: the one set of rules that broker autostart
// (ipc/broker_client.h StartBroker), the tools (qr-demo, qr-reliability) and
// the tests all use. In order, the first that is an executable file:
//
//   1. an explicit choice, taken as given (exec reports a bad one):
//      $QR_BROKER_BIN for autostart; a --broker flag or $QR_TEST_BROKER_BIN
//      for tests and test tools;
//   2. qr-broker beside the running executable (an install, or the flat
//      directory tools/gpu/stage.sh stages);
//   3. the running executable's Bazel runfiles: <dir>/quickreduce/ipc/broker/
//      qr-broker for dir in $RUNFILES_DIR, $TEST_SRCDIR, <executable>.runfiles
//      (`bazel run`, `bazel test`, a bazel-bin binary run by hand);
//   4. the Bazel output tree: <executable's dir>/../ipc/broker/qr-broker
//      (bazel-bin/tools/qr-demo run by hand, without its runfiles);
//   5. qr-broker on $PATH, as execvp searches it, where the caller allows it
//      (autostart does; tests never do, so they cannot run an installed broker
//      instead of the one they built).
//
//   QR_ASSIGN_OR_RETURN(std::string bin,
//                       FindBrokerBinary(BrokerSearchFromEnvironment(kEnvBrokerBin.String())));
#ifndef QR_IPC_BROKER_BINARY_H_
#define QR_IPC_BROKER_BINARY_H_

#include <string>
#include <vector>

#include "common/status.h"

namespace qr::ipc {

// What FindBrokerBinary searches; BrokerSearchFromEnvironment fills it for
// this process, tests fill it by hand.
struct BrokerSearch {
  std::string explicit_path;                // rule 1 when not empty
  std::string executable;                   // rules 2-4 (absolute); empty skips them
  std::vector<std::string> runfiles_roots;  // rule 3, before <executable>.runfiles
  std::string workspace = "quickreduce";    // the runfiles' top directory
  bool search_path = true;                  // rule 5
  std::string path;                         // $PATH for rule 5
};

// explicit_path and search_path as given; the executable from /proc/self/exe;
// runfiles roots from $RUNFILES_DIR and $TEST_SRCDIR, the workspace from
// $TEST_WORKSPACE (else "quickreduce"); $PATH (unset: "/bin:/usr/bin", as
// execvp has it).
BrokerSearch BrokerSearchFromEnvironment(std::string explicit_path, bool search_path = true);

// The explicit path as given, else the first candidate above that is an
// executable regular file, resolved to an absolute path (realpath). kUnavailable
// naming every place looked at when there is none.
[[nodiscard]] StatusOr<std::string> FindBrokerBinary(const BrokerSearch& search);

}  // namespace qr::ipc

#endif  // QR_IPC_BROKER_BINARY_H_
