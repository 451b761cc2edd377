// One qr-demo worker (rank f.worker_rank): joins the group through the C
// ABI, runs every (regime, dtype, size) the flags ask for, checks each output
// bit for bit against the host reference of the algorithm the policy chose
// and against the codec's proven bound of the exact sum, times the calls,
// and (rank 0) prints progress, the table and the policy block.
#ifndef QR_TOOLS_QR_DEMO_WORKER_H_
#define QR_TOOLS_QR_DEMO_WORKER_H_

#include "tools/qr_demo_flags.h"

namespace qr::demo {

// The process exit code: 0 every check passed, 1 a result mismatched, 2 the
// worker could not start (GPU, join, configuration), 3 a call failed (the
// group is aborted so that the peers stop at once).
int Work(const DemoFlags& f);

}  // namespace qr::demo

#endif  // QR_TOOLS_QR_DEMO_WORKER_H_
