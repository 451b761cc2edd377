#include "tests/broker/harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <thread>

#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "ipc/broker_client.h"
#include "ipc/names.h"
#include "ipc/wire.h"
#include "tools/qrctl_lib.h"

namespace qr::testing {

TempDir::TempDir() {
  char tmpl[] = "/tmp/qrb-XXXXXX";
  char* p = ::mkdtemp(tmpl);
  if (p == nullptr) std::abort();
  path_ = p;
}

TempDir::~TempDir() {
  std::string cmd = "rm -rf '" + path_ + "'";
  int rc = std::system(cmd.c_str());
  (void)rc;
}

Pipe::Pipe() {
  if (::pipe(fds_) != 0) std::abort();
}
Pipe::~Pipe() {
  ::close(fds_[0]);
  if (fds_[1] >= 0) ::close(fds_[1]);
}
void Pipe::CloseWrite() {
  ::close(fds_[1]);
  fds_[1] = -1;
}
void Pipe::Write(const void* data, size_t n) {
  ssize_t w = ::write(fds_[1], data, n);
  (void)w;
}
bool Pipe::Read(void* data, size_t n, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t got = 0;
  while (got < n) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now())
                                    .count());
    if (left <= 0) return false;
    pollfd p{fds_[0], POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) continue;
    ssize_t r = ::read(fds_[0], static_cast<char*>(data) + got, n - got);
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

ipc::JoinParams HostJoin(const std::string& socket, const std::string& group, int rank,
                         int world_size) {
  ipc::JoinParams p;
  p.socket_path = socket;
  p.group = group;
  p.rank = rank;
  p.world_size = world_size;
  p.device_id = std::string(ipc::kHostDeviceName);
  p.buffer_bytes = 1 << 20;
  p.timeout = std::chrono::milliseconds(10000);
  p.autostart = false;
  return p;
}

std::array<uint8_t, ipc::kBlobBytes> BlobFor(int rank) {
  std::array<uint8_t, ipc::kBlobBytes> b{};
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(rank * 31 + i);
  return b;
}

Status PublishBoth(ipc::GroupMembership& m0, ipc::GroupMembership& m1) {
  Status s1;
  std::thread t([&] { s1 = m1.PublishAndWaitReady(ipc::BlobKind::kHostSegment, BlobFor(1)); });
  Status s0 = m0.PublishAndWaitReady(ipc::BlobKind::kHostSegment, BlobFor(0));
  t.join();
  return s0.ok() ? s1 : s0;
}

std::vector<std::string> ShmObjectsWithPrefix(const std::string& prefix) {
  std::vector<std::string> out;
  std::string p = prefix[0] == '/' ? prefix.substr(1) : prefix;
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, p.c_str(), p.size()) == 0) out.push_back(e->d_name);
  }
  ::closedir(d);
  return out;
}

int CountOpenFds(pid_t pid) {
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

std::chrono::microseconds CpuTimeOf(pid_t pid) {
  clockid_t clock{};
  timespec ts{};
  if (::clock_getcpuclockid(pid, &clock) != 0 || ::clock_gettime(clock, &ts) != 0) {
    return std::chrono::microseconds(-1);
  }
  return std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

int ConnectRaw(const std::string& socket) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::vector<uint8_t> ReadUntilEof(int fd, std::chrono::milliseconds timeout, bool* eof) {
  std::vector<uint8_t> all;
  if (eof != nullptr) *eof = false;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    uint8_t buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) {
      if (eof != nullptr) *eof = true;
      break;
    }
    all.insert(all.end(), buf, buf + n);
  }
  return all;
}

std::vector<uint8_t> StatusBurst(size_t bytes) {
  auto frame = ipc::EncodeFrame(ipc::StatusRequest{});
  std::vector<uint8_t> out;
  while (frame.ok() && out.size() + frame->size() <= bytes) {
    out.insert(out.end(), frame->begin(), frame->end());
  }
  return out;
}

StatusOr<std::chrono::microseconds> TimeFormation(const std::string& socket,
                                                  const std::string& group,
                                                  std::chrono::milliseconds timeout) {
  auto start = std::chrono::steady_clock::now();
  ipc::JoinParams p0 = HostJoin(socket, group, 0, 2), p1 = HostJoin(socket, group, 1, 2);
  p0.timeout = p1.timeout = timeout;
  QR_ASSIGN_OR_RETURN(auto m0, ipc::GroupMembership::Join(p0));
  QR_ASSIGN_OR_RETURN(auto m1, ipc::GroupMembership::Join(p1));
  QR_RETURN_IF_ERROR(PublishBoth(*m0, *m1));
  auto took = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start);
  QR_RETURN_IF_ERROR(m0->Leave());
  QR_RETURN_IF_ERROR(m1->Leave());
  return took;
}

ipc::GroupSegment::CreateParams OtherBrokerSegment(const std::string& group,
                                                   const std::string& other_socket) {
  ipc::GroupSegment::CreateParams p;
  p.name = ipc::SegmentName(::getuid(), group, 1, std::random_device()());
  p.group = group;
  p.world_size = 2;
  p.generation = 1;
  p.socket_path = other_socket;
  return p;
}

std::vector<std::unique_ptr<ipc::GroupSegment>> LiveForeignSegments(
    int count, const std::string& other_socket) {
  std::vector<std::unique_ptr<ipc::GroupSegment>> out;
  std::string tag = UniqueGroup("busy");
  for (int i = 0; i < count; ++i) {
    ipc::GroupSegment::CreateParams p =
        OtherBrokerSegment(tag + "-" + std::to_string(i), other_socket);
    p.world_size = 8;
    auto seg = ipc::GroupSegment::Create(p);
    if (seg.ok()) out.push_back(std::move(*seg));
  }
  return out;
}

CtlRun Qrctl(std::vector<std::string> args) {
  args.insert(args.begin(), "qrctl");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  int code = tools::RunQrctl(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

std::string EnterPrivateShm(size_t bytes) {
  static const std::string result = [bytes]() -> std::string {
    if (::getuid() != 0) return "needs root (a private mount namespace)";
    if (::unshare(CLONE_NEWNS) != 0)
      return std::string("unshare(CLONE_NEWNS): ") + std::strerror(errno);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      return std::string("making / private: ") + std::strerror(errno);
    }
    std::string opts = "size=" + std::to_string(bytes) + ",mode=1777";
    if (::mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0) {
      return std::string("mounting a tmpfs on /dev/shm: ") + std::strerror(errno);
    }
    return "";
  }();
  return result;
}

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

}  // namespace qr::testing
