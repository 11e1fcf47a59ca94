// Issue 17: each man page (docs/man/*.scd) is true to its program's --help: every option the
// help names is in the page and every option the page sets in bold is in the help, and so
// for the exit codes and the signals.
#include <array>
#include <cstdio>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <regex>
#include <set>
#include <string>

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

std::string program_output(const std::string& cmd) {
  std::string out;
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  ::pclose(p);
  return out;
}

std::string file(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::set<std::string> matches(const std::string& text, const std::regex& re, int group = 1) {
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it)
    out.insert((*it)[group].str());
  return out;
}

std::string section(const std::string& scd, const std::string& name) {
  const auto at = scd.find("\n# " + name + "\n");
  if (at == std::string::npos) return "";
  const auto end = scd.find("\n# ", at + 3);
  return scd.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

struct Page {
  const char* env;
  const char* binary;
  const char* scd;
};

class ManPage : public ::testing::TestWithParam<Page> {};

TEST_P(ManPage, OptionsExitCodesAndSignalsMatchTheHelpText) {
  const Page& p = GetParam();
  const std::string help = program_output(env_or(p.env, p.binary) + " --help");
  ASSERT_NE(help.find("usage:"), std::string::npos) << help;
  const std::string scd = file(std::string(MAN_SOURCE_DIR) + "/" + p.scd);
  ASSERT_FALSE(scd.empty()) << p.scd;

  const std::regex option(R"((--[a-z][a-z0-9-]*))");
  const auto in_help = matches(help, option);
  const auto in_page = matches(scd, option);
  const auto bold_in_page = matches(scd, std::regex(R"(\*(--[a-z][a-z0-9-]*))"));
  for (const auto& o : in_help) EXPECT_TRUE(in_page.count(o)) << p.scd << " lacks " << o;
  // --help itself is every page's; the help texts need not name themselves.
  for (const auto& o : bold_in_page)
    if (o != "--help") EXPECT_TRUE(in_help.count(o)) << "--help lacks " << o;

  // Exit codes: "N  text" / "N text" after "Exit" in the help, "*N*" items in EXIT STATUS.
  const std::string exit_help = help.substr(help.rfind("Exit"));
  const auto codes_help = matches(exit_help, std::regex(R"((?:^|[\s,:])(\d)\s+[a-z(])"));
  const auto codes_page = matches(section(scd, "EXIT STATUS"), std::regex(R"(\n\*(\d)\*\n)"));
  EXPECT_EQ(codes_help, codes_page) << p.scd;
  EXPECT_FALSE(codes_page.empty());

  const std::regex signal(R"((SIG[A-Z0-9]+))");
  for (const auto& s : matches(help, signal))
    EXPECT_TRUE(matches(scd, signal).count(s)) << p.scd << " lacks " << s;
}

INSTANTIATE_TEST_SUITE_P(
    Programs, ManPage,
    ::testing::Values(Page{"UNETBACKD_BIN", UNETBACKD_BIN_DEFAULT, "unetbackd.8.scd"},
                      Page{"UNETBACK_CTL_BIN", UNETBACK_CTL_BIN_DEFAULT, "unetback-ctl.8.scd"},
                      Page{"NETFRONT_SHIM_BIN", NETFRONT_SHIM_BIN_DEFAULT, "netfront-shim.1.scd"},
                      Page{"XENSIM_BIN", XENSIM_BIN_DEFAULT, "xensim.1.scd"},
                      Page{"UNETBACK_XL_BIN", UNETBACK_XL_BIN_DEFAULT, "unetback-xl.1.scd"}),
    [](const auto& info) {
      std::string n = info.param.scd;
      n = n.substr(0, n.find('.'));
      std::erase(n, '-');
      return n;
    });

// vif-unetback has no --help: its page is checked against the script's actions.
TEST(ManPageVifUnetback, DescribesEveryActionTheScriptTakes) {
  const std::string script = file(std::string(HOTPLUG_DIR) + "/vif-unetback");
  const std::string scd = file(std::string(MAN_SOURCE_DIR) + "/vif-unetback.8.scd");
  ASSERT_FALSE(script.empty());
  for (const char* action : {"*online*", "*offline*", "*add*", "*remove*"})
    EXPECT_NE(scd.find(action), std::string::npos) << action;
  for (const char* var : {"XENBUS_PATH", "vif", "XENSTORED_PATH"}) {
    EXPECT_NE(script.find(var), std::string::npos) << var;
    EXPECT_NE(scd.find(std::string("*") + var + "*"), std::string::npos) << var;
  }
  EXPECT_NE(script.find("exit 2"), std::string::npos);
  EXPECT_NE(section(scd, "EXIT STATUS").find("*2*"), std::string::npos);
}

}  // namespace
