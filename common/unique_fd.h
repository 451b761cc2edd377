// UniqueFd: a move-only owner of a file descriptor, closed on destruction.
#ifndef QR_COMMON_UNIQUE_FD_H_
#define QR_COMMON_UNIQUE_FD_H_

namespace qr {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  // Gives up ownership without closing.
  int release();
  // Closes the held descriptor (errors are logged, never fatal), takes fd.
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

}  // namespace qr

#endif  // QR_COMMON_UNIQUE_FD_H_
