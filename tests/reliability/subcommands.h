// qr-reliability's subcommands (qr_reliability.cc says what each measures);
// each returns the process's exit code.
#ifndef QR_TESTS_RELIABILITY_SUBCOMMANDS_H_
#define QR_TESTS_RELIABILITY_SUBCOMMANDS_H_

#include <string>

namespace qr::testing::reliability {

int PeerKill(const std::string& broker_bin, const std::string& setups_text,
             const std::string& sizes_text, int repeat, const std::string& regime, int device);
int Cycles(const std::string& broker_bin, int cycles, double minutes, int snapshot_every,
           int world_size);
int ShmNeeds(const std::string& broker_bin, int device);
int ReserveCost(int repeat);
int ShmFull(const std::string& broker_bin);

}  // namespace qr::testing::reliability

#endif  // QR_TESTS_RELIABILITY_SUBCOMMANDS_H_
