// Keeps the broker's log from filling the disk: when stderr is a regular file
// (the autostart log beside the socket), it is rotated to `<file>.1` once it
// exceeds a size, or emptied when it has no name any more.
#ifndef QR_IPC_BROKER_LOG_FILE_H_
#define QR_IPC_BROKER_LOG_FILE_H_

#include <cstdint>

namespace qr::broker {

// Rotates (or empties) the file on stderr when it holds more than max_bytes;
// stdout and stderr then go to the new file. Does nothing when stderr is not
// a regular file. Never fails: a log that cannot be rotated is left as it is.
void CapLogFile(uint64_t max_bytes);

}  // namespace qr::broker

#endif  // QR_IPC_BROKER_LOG_FILE_H_
