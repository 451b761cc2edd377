#include "common/subprocess.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <thread>
#include <utility>

#include "common/syscall.h"

extern char** environ;

namespace qr {

StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  if (argv.empty()) return InvalidArgumentError("Spawn: empty argv");
  // Build everything before fork: the child may only exec or _exit.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const std::string& add : env) {
      if (add.compare(0, name.size() + 1, name + "=") == 0) overridden = true;
    }
    if (!overridden) env_strings.push_back(std::move(entry));
  }
  for (const std::string& add : env) env_strings.push_back(add);
  std::vector<char*> envp;
  for (const std::string& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoToStatus(errno, "fork");
  if (pid == 0) {
    ::execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  return pid;
}

StatusOr<int> WaitExit(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      continue;
    }
    if (r < 0 && errno != EINTR) return ErrnoToStatus(errno, "waitpid");
    if (std::chrono::steady_clock::now() >= deadline) {
      return TimeoutError("process " + std::to_string(pid) + " still running");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace qr
