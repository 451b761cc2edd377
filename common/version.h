// The quickreduce release version, one definition for every component: the
// broker reports it (qrctl status), the C ABI returns it (qr_version), and the
// Python package and its wheel carry it (python/BUILD reads this line).
#ifndef QR_COMMON_VERSION_H_
#define QR_COMMON_VERSION_H_

namespace qr {

inline constexpr const char* kVersion = "0.1.0";

}  // namespace qr

#endif  // QR_COMMON_VERSION_H_
