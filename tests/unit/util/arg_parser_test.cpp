// ArgParser: the command-line reader every program shares. Each scenario is a command line a
// user or a script could type, and what the program sees of it.
#include "common/util/arg_parser.hpp"

#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace unetback::cli {
namespace {

constexpr OptionSpec kOptions[] = {kHelp,
                                   flag("json"),
                                   valued("mtu"),
                                   valued("vif", "a SPEC"),
                                   OptionSpec{"port", true, {}, true, '\0'},
                                   OptionSpec{"verbose", false, {}, true, 'v'}};

/// What a program would see: "name=value" per option, "[text]" per positional argument,
/// "--" for the end of the options, then "error: ..." if the line is refused.
std::string read_all(std::vector<std::string_view> args, Grammar grammar = {}) {
  ArgParser p(args, kOptions, grammar);
  std::string out;
  while (const auto a = p.next()) {
    if (!out.empty()) out += ' ';
    if (a->kind == Arg::Kind::end_of_options) {
      out += "--";
      for (auto r : p.rest()) out += " [" + std::string(r) + "]";
      break;
    }
    out += a->positional() ? "[" + std::string(a->value) + "]"
                           : std::string(a->name) + "=" + std::string(a->value);
  }
  if (const auto& e = p.error()) out += (out.empty() ? "" : " ") + ("error: " + e->message());
  return out;
}

TEST(ArgParser, ValuesComeSpacedOrAfterAnEqualsSign) {
  EXPECT_EQ(read_all({"--mtu", "9000", "--vif=mac=00:16:3e:00:00:01,bridge=br0"}),
            "mtu=9000 vif=mac=00:16:3e:00:00:01,bridge=br0");
  // An empty value is a value (the program decides whether it is a good one).
  EXPECT_EQ(read_all({"--mtu=", "--mtu", ""}), "mtu= mtu=");
}

TEST(ArgParser, TheNextArgumentIsTheValueWhateverItLooksLike) {
  // As getopt_long: "--mtu --json" sets the MTU to "--json", it does not turn on --json.
  EXPECT_EQ(read_all({"--mtu", "--json"}), "mtu=--json");
  EXPECT_EQ(read_all({"--mtu", "-5"}), "mtu=-5");
}

TEST(ArgParser, FlagsAndShortNames) {
  EXPECT_EQ(read_all({"--json", "-h", "-v"}), "json= help= verbose=");
}

TEST(ArgParser, PositionalArgumentsAreLeftToTheProgramInOrder) {
  EXPECT_EQ(read_all({"list", "--json", "7/0", "-x", "-"}), "[list] json= [7/0] [-x] [-]");
}

TEST(ArgParser, AProgramWithoutPositionalArgumentsNamesTheStrayOne) {
  EXPECT_EQ(read_all({"--json", "5001", "--mtu", "1"}, {.positionals = false}),
            "json= error: unexpected argument '5001'");
  EXPECT_EQ(read_all({"-x"}, {.positionals = false}), "error: unexpected argument '-x'");
  // A value is not a positional argument.
  EXPECT_EQ(read_all({"--mtu", "5001"}, {.positionals = false}), "mtu=5001");
}

TEST(ArgParser, BadValueNamesTheValueAndTheOption) {
  const std::vector<std::string_view> args{"--mtu=9x"};
  ArgParser p(args, kOptions);
  EXPECT_EQ(p.next()->bad_value(), "bad value '9x' for --mtu");
}

TEST(ArgParser, RestHoldsWhatFollowsASubcommand) {
  const std::vector<std::string_view> args{"--json", "create", "--bogus", "x"};
  ArgParser p(args, kOptions);
  ASSERT_TRUE(p.next()->is("json"));
  const auto cmd = p.next();
  ASSERT_TRUE(cmd && cmd->positional());
  EXPECT_EQ(cmd->value, "create");
  ASSERT_EQ(p.rest().size(), 2U);  // "--bogus" is the subcommand's to judge
  EXPECT_EQ(p.rest()[0], "--bogus");
  EXPECT_FALSE(p.error());
}

TEST(ArgParser, DoubleDashEndsTheOptionsOnlyWhereTheProgramSaysSo) {
  EXPECT_EQ(read_all({"--json", "--", "--mtu", "x"}, {.double_dash = true}),
            "json= -- [--mtu] [x]");
  EXPECT_EQ(read_all({"--json", "--", "--mtu", "x"}), "json= error: unknown option --");
}

TEST(ArgParser, UnknownOptionIsNamedWithoutItsValue) {
  EXPECT_EQ(read_all({"--json", "--bogus=1", "--mtu", "1"}), "json= error: unknown option --bogus");
  EXPECT_EQ(read_all({"--bogus"}), "error: unknown option --bogus");
  // No prefix matching: --mt is not --mtu.
  EXPECT_EQ(read_all({"--mt", "1"}), "error: unknown option --mt");
}

TEST(ArgParser, MissingValueNamesTheOptionAndWhatItWants) {
  EXPECT_EQ(read_all({"--json", "--mtu"}), "json= error: --mtu needs a value");
  EXPECT_EQ(read_all({"--vif"}), "error: --vif needs a SPEC");
}

TEST(ArgParser, AFlagTakesNoValue) {
  EXPECT_EQ(read_all({"--json=yes"}), "error: --json takes no value");
}

TEST(ArgParser, OnceOptionsRefuseASecondTimeOthersRepeat) {
  EXPECT_EQ(read_all({"--vif", "a", "--vif", "b", "--mtu", "1", "--mtu=2"}),
            "vif=a vif=b mtu=1 mtu=2");
  EXPECT_EQ(read_all({"--port", "1", "--port=2"}), "port=1 error: --port given twice");
  EXPECT_EQ(read_all({"-v", "--verbose"}), "verbose= error: --verbose given twice");
}

TEST(ArgParser, NothingIsReadAfterAnError) {
  const std::vector<std::string_view> args{"--bogus", "--json"};
  ArgParser p(args, kOptions);
  EXPECT_FALSE(p.next());
  EXPECT_FALSE(p.next());
  ASSERT_TRUE(p.error());
  EXPECT_EQ(p.error()->kind, ArgError::Kind::unknown_option);
  EXPECT_EQ(p.error()->option, "--bogus");
  EXPECT_TRUE(p.rest().empty());
}

TEST(ArgParser, SeenTellsWhichOptionsWereGiven) {
  const std::vector<std::string_view> args{"--mtu=1", "-v"};
  ArgParser p(args, kOptions);
  while (p.next()) {
  }
  EXPECT_TRUE(p.seen("mtu"));
  EXPECT_TRUE(p.seen("verbose"));
  EXPECT_FALSE(p.seen("json"));
}

TEST(ArgParser, AnEmptyCommandLineIsNoItemAndNoError) {
  EXPECT_EQ(read_all({}), "");
}

}  // namespace
}  // namespace unetback::cli
