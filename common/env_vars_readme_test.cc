// README.md's "Environment variables" table equals the declared table
// (common/env_vars.h): the same variables in the same order, with the same
// aliases, default and meaning cells, and each fixed default spelled as the
// code applies it. A variable added to one and not the other fails here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/env_vars.h"

namespace qr {
namespace {

struct Row {
  std::string name;
  std::string alias;
  std::string default_doc;
  std::string doc;
};

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(' ');
  const size_t e = s.find_last_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string ReadReadme() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir == nullptr || workspace == nullptr) return "";
  std::ifstream in(std::string(srcdir) + "/" + workspace + "/README.md");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The rows of the table under "## Environment variables", up to the next
// section. Cells are split at " | " (no cell of that table holds one).
std::vector<Row> ParseTable(const std::string& readme, std::string* error) {
  std::vector<Row> rows;
  std::istringstream lines(readme);
  std::string line;
  bool in_section = false;
  while (std::getline(lines, line)) {
    if (line.rfind("## ", 0) == 0) {
      if (in_section) break;
      in_section = line == "## Environment variables";
      continue;
    }
    if (!in_section || line.rfind("| `", 0) != 0) continue;
    if (line.size() < 4 || line.substr(line.size() - 2) != " |") {
      *error = "row does not end in ' |': " + line;
      return {};
    }
    std::vector<std::string> cells;
    std::string body = line.substr(2, line.size() - 4);
    for (size_t at = 0;;) {
      const size_t bar = body.find(" | ", at);
      cells.push_back(Trim(body.substr(at, bar == std::string::npos ? bar : bar - at)));
      if (bar == std::string::npos) break;
      at = bar + 3;
    }
    if (cells.size() != 3) {
      *error = "row has " + std::to_string(cells.size()) + " cells, not 3: " + line;
      return {};
    }
    // "`NAME`" or "`NAME` (alias `ALIAS`)".
    Row row;
    const std::string& var = cells[0];
    const size_t close = var.find('`', 1);
    row.name = var.substr(1, close - 1);
    const std::string rest = var.substr(close + 1);
    const std::string prefix = " (alias `";
    if (!rest.empty()) {
      if (rest.rfind(prefix, 0) != 0 || rest.substr(rest.size() - 2) != "`)") {
        *error = "variable cell is neither `NAME` nor `NAME` (alias `ALIAS`): " + var;
        return {};
      }
      row.alias = rest.substr(prefix.size(), rest.size() - prefix.size() - 2);
    }
    row.default_doc = cells[1];
    row.doc = cells[2];
    rows.push_back(row);
  }
  return rows;
}

// The default's spelling in the variable's own syntax, "" where the reader
// computes it or unset means absent.
std::string DeclaredDefault(const EnvVar& v) {
  if (!v.has_fallback) return "";
  switch (v.type) {
    case EnvType::kBool:
    case EnvType::kInt:
      return std::to_string(v.fallback);
    case EnvType::kChoice:
      return std::string(v.fallback_text);
    case EnvType::kString:
      return "";
  }
  return "";
}

std::string RowText(const EnvVar& v) {
  std::string var = "`" + std::string(v.name) + "`";
  if (!v.alias.empty()) var += " (alias `" + std::string(v.alias) + "`)";
  return "| " + var + " | " + std::string(v.default_doc) + " | " + std::string(v.doc) + " |";
}

TEST(EnvVarsReadmeTest, ReadmeTableEqualsTheDeclaredTable) {
  const std::string readme = ReadReadme();
  ASSERT_FALSE(readme.empty()) << "README.md not found in the runfiles";
  std::string error;
  const std::vector<Row> rows = ParseTable(readme, &error);
  ASSERT_TRUE(error.empty()) << error;
  const size_t declared = sizeof(kEnvVars) / sizeof(kEnvVars[0]);
  ASSERT_EQ(rows.size(), declared) << "README.md's table has " << rows.size()
                                   << " variables, common/env_vars.h declares " << declared;
  for (size_t i = 0; i < declared; ++i) {
    const EnvVar& v = *kEnvVars[i];
    const Row& r = rows[i];
    SCOPED_TRACE("row " + std::to_string(i + 1) + "; the declared row is:\n" + RowText(v));
    EXPECT_EQ(r.name, v.name);
    EXPECT_EQ(r.alias, v.alias);
    EXPECT_EQ(r.default_doc, v.default_doc);
    EXPECT_EQ(r.doc, v.doc);
    // The default cell opens with the value the code falls back to.
    const std::string fallback = DeclaredDefault(v);
    if (!fallback.empty()) {
      EXPECT_EQ(r.default_doc.rfind("`" + fallback + "`", 0), 0u);
    }
  }
}

TEST(EnvVarsReadmeTest, ParserSeesAChangedCell) {
  std::string error;
  const std::vector<Row> rows = ParseTable(
      "## Environment variables\n\n| variable | default | meaning |\n| --- | --- | --- |\n"
      "| `QR_A` (alias `VLLM_A`) | `1` | one |\n| `QR_B` | unset | two, three |\n## Next\n"
      "| `QR_C` | x | y |\n",
      &error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "QR_A");
  EXPECT_EQ(rows[0].alias, "VLLM_A");
  EXPECT_EQ(rows[0].default_doc, "`1`");
  EXPECT_EQ(rows[1].alias, "");
  EXPECT_EQ(rows[1].doc, "two, three");
  ParseTable("## Environment variables\n| `QR_A` | 1 |\n", &error);
  EXPECT_THAT(error, ::testing::HasSubstr("not 3"));
}

}  // namespace
}  // namespace qr
