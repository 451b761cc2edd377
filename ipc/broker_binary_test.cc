#include "ipc/broker_binary.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "common/syscall.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/status_matchers.h"

namespace qr::ipc {
namespace {

using ::qr::testing::StatusIs;
using ::testing::HasSubstr;

// A scratch tree: <root>/bin/tool is "the running executable"; Put lays
// qr-broker files out around it.
class BrokerBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/qr-broker-binary-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    search_.executable = Put("bin/tool");
    search_.search_path = false;
  }
  void TearDown() override {
    const std::string cmd = "rm -rf '" + root_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  // Creates root/rel (and its directories) with `mode`; its absolute path.
  std::string Put(const std::string& rel, mode_t mode = 0755) {
    const std::string path = root_ + "/" + rel;
    const std::string mk = "mkdir -p '" + path.substr(0, path.rfind('/')) + "'";
    EXPECT_EQ(std::system(mk.c_str()), 0);
    std::ofstream(path) << "#!/bin/sh\n";
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    return path;
  }
  std::string Find() {
    StatusOr<std::string> found = FindBrokerBinary(search_);
    return found.ok() ? *found : "error: " + found.status().message();
  }

  std::string root_;
  BrokerSearch search_;
};

TEST_F(BrokerBinaryTest, AnExplicitChoiceIsTakenAsGiven) {
  Put("bin/qr-broker");
  search_.explicit_path = "/nonexistent/qr-broker";
  EXPECT_EQ(Find(), "/nonexistent/qr-broker");  // exec says why it fails
  search_.explicit_path = "qr-broker";          // a bare name: exec searches $PATH
  EXPECT_EQ(Find(), "qr-broker");
}

TEST_F(BrokerBinaryTest, BesideTheExecutableComesFirst) {
  const std::string beside = Put("bin/qr-broker");
  Put("runfiles/quickreduce/ipc/broker/qr-broker");
  Put("bin/tool.runfiles/quickreduce/ipc/broker/qr-broker");
  Put("ipc/broker/qr-broker");
  search_.runfiles_roots = {root_ + "/runfiles"};
  EXPECT_EQ(Find(), beside);
}

TEST_F(BrokerBinaryTest, RunfilesRootsInOrderThenTheExecutablesOwn) {
  const std::string own = Put("bin/tool.runfiles/quickreduce/ipc/broker/qr-broker");
  const std::string second = Put("second/quickreduce/ipc/broker/qr-broker");
  const std::string first = Put("first/quickreduce/ipc/broker/qr-broker");
  search_.runfiles_roots = {root_ + "/first", root_ + "/second"};
  EXPECT_EQ(Find(), first);
  ASSERT_EQ(::unlink(first.c_str()), 0);
  EXPECT_EQ(Find(), second);
  ASSERT_EQ(::unlink(second.c_str()), 0);
  EXPECT_EQ(Find(), own);
}

TEST_F(BrokerBinaryTest, TheWorkspaceNamesTheRunfilesDirectory) {
  const std::string other = Put("rf/other_ws/ipc/broker/qr-broker");
  search_.runfiles_roots = {root_ + "/rf"};
  EXPECT_THAT(Find(), HasSubstr("error: "));
  search_.workspace = "other_ws";
  EXPECT_EQ(Find(), other);
}

TEST_F(BrokerBinaryTest, TheBazelOutputTreeWithoutRunfiles) {
  // bazel-bin/tools/qr-demo beside bazel-bin/ipc/broker/qr-broker.
  const std::string tree = Put("ipc/broker/qr-broker");
  char resolved[PATH_MAX];
  ASSERT_NE(::realpath(tree.c_str(), resolved), nullptr);
  EXPECT_EQ(Find(), resolved);
}

TEST_F(BrokerBinaryTest, PathOnlyWhenAllowedAndInItsOrder) {
  const std::string a = Put("a/qr-broker");
  const std::string b = Put("b/qr-broker");
  search_.path = root_ + "/none:" + root_ + "/b:" + root_ + "/a";
  EXPECT_THAT(Find(), HasSubstr("error: "));
  search_.search_path = true;
  EXPECT_EQ(Find(), b);
}

TEST_F(BrokerBinaryTest, SkipsWhatCannotBeExecuted) {
  Put("bin/qr-broker", 0644);
  ASSERT_EQ(::mkdir((root_ + "/dir").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((root_ + "/dir/qr-broker").c_str(), 0755), 0);  // passes access(X_OK)
  const std::string good = Put("good/qr-broker");
  search_.search_path = true;
  search_.path = root_ + "/dir:" + root_ + "/good";
  EXPECT_EQ(Find(), good);
}

TEST_F(BrokerBinaryTest, NoneFoundNamesEveryPlaceLookedAt) {
  search_.runfiles_roots = {root_ + "/rf"};
  search_.search_path = true;
  search_.path = root_ + "/p";
  StatusOr<std::string> found = FindBrokerBinary(search_);
  EXPECT_THAT(found.status(), StatusIs(StatusCode::kUnavailable, HasSubstr("no executable")));
  for (const std::string& place :
       {root_ + "/bin/qr-broker", root_ + "/rf/quickreduce/ipc/broker/qr-broker",
        root_ + "/bin/tool.runfiles/quickreduce/ipc/broker/qr-broker",
        root_ + "/bin/../ipc/broker/qr-broker", root_ + "/p/qr-broker"}) {
    EXPECT_THAT(found.status().message(), HasSubstr(place));
  }
}

TEST_F(BrokerBinaryTest, ARelativeRunfilesRootIsMadeAbsolute) {
  Put("rel/quickreduce/ipc/broker/qr-broker");
  char cwd[PATH_MAX];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(::chdir(root_.c_str()), 0);
  search_.runfiles_roots = {"rel"};
  const std::string found = Find();
  ASSERT_EQ(::chdir(cwd), 0);
  EXPECT_EQ(found.front(), '/') << found;
}

TEST(BrokerSearchFromEnvironmentTest, ReadsThisProcess) {
  ::setenv("RUNFILES_DIR", "/r1", 1);
  ::setenv("TEST_SRCDIR", "/r2", 1);
  ::setenv("TEST_WORKSPACE", "ws", 1);
  ::setenv("PATH", "/p1:/p2", 1);
  BrokerSearch s = BrokerSearchFromEnvironment("x", /*search_path=*/false);
  EXPECT_EQ(s.explicit_path, "x");
  EXPECT_EQ(s.executable, SelfExecutablePath());
  EXPECT_EQ(s.runfiles_roots, (std::vector<std::string>{"/r1", "/r2"}));
  EXPECT_EQ(s.workspace, "ws");
  EXPECT_FALSE(s.search_path);
  EXPECT_EQ(s.path, "/p1:/p2");
  ::unsetenv("RUNFILES_DIR");
  ::unsetenv("TEST_SRCDIR");
  ::unsetenv("TEST_WORKSPACE");
  ::unsetenv("PATH");
  s = BrokerSearchFromEnvironment("");
  EXPECT_TRUE(s.runfiles_roots.empty());
  EXPECT_EQ(s.workspace, "quickreduce");
  EXPECT_TRUE(s.search_path);
  EXPECT_EQ(s.path, "/bin:/usr/bin");  // execvp's default
}

}  // namespace
}  // namespace qr::ipc
