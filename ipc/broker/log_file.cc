#include "ipc/broker/log_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "spdlog/spdlog.h"

namespace qr::broker {

void CapLogFile(uint64_t max_bytes) {
  struct stat st {};
  if (::fstat(STDERR_FILENO, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) <= max_bytes) {
    return;
  }
  // The log is whatever file stderr is (the autostart log beside the
  // socket); it is rotated by its name if it still has one, else emptied.
  char target[4096];
  ssize_t n = ::readlink("/proc/self/fd/2", target, sizeof(target) - 1);
  bool rotated = false;
  if (n > 0) {
    target[n] = '\0';
    std::string path(target);
    struct stat by_name {};
    if (::lstat(path.c_str(), &by_name) == 0 && by_name.st_ino == st.st_ino &&
        by_name.st_dev == st.st_dev && ::rename(path.c_str(), (path + ".1").c_str()) == 0) {
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd >= 0) {
        ::dup2(fd, STDOUT_FILENO);
        ::dup2(fd, STDERR_FILENO);
        ::close(fd);
        rotated = true;
      }
    }
  }
  if (!rotated && ::ftruncate(STDERR_FILENO, 0) != 0) return;
  spdlog::info("log {} after reaching {} bytes", rotated ? "rotated to <log>.1" : "emptied",
               st.st_size);
}

}  // namespace qr::broker
