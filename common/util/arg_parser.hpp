// ArgParser: the one command-line reader of every program here (unetbackd, netfront-shim,
// unetback-ctl, unetback-xl, xensim, unetback-udpflow, unetback-userhop). It knows each
// option's name and whether it takes a value, splits "--name=value" and "--name value", and
// names the option in every error (unknown, missing or unexpected value, given twice); the
// program gives the values their meaning, numbers through parse_decimal(). Pure: no exit(),
// no printing, so that every program's parsing is unit-tested.
#pragma once

#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>

namespace unetback::cli {

/// One option a program takes: `--<name>`, and `-<short_name>` if it has one.
struct OptionSpec {
  std::string_view name;
  bool takes_value = false;
  /// What the error calls a missing value: "--vif needs a SPEC". "a value" when empty.
  std::string_view value_name = {};
  /// A second occurrence is an error ("--port given twice"); otherwise the program sees both
  /// (repeatable options, or the last one wins).
  bool once = false;
  char short_name = '\0';
};

/// Shorthands for the tables: `cli::flag("json")`, `cli::valued("vif", "a SPEC")`.
[[nodiscard]] constexpr OptionSpec flag(std::string_view name, char short_name = '\0') {
  return OptionSpec{name, false, {}, false, short_name};
}
[[nodiscard]] constexpr OptionSpec valued(std::string_view name, std::string_view value_name = {}) {
  return OptionSpec{name, true, value_name, false, '\0'};
}
/// The usual --help / -h.
inline constexpr OptionSpec kHelp = flag("help", 'h');

/// What is wrong with a command line.
struct ArgError {
  enum class Kind {
    unknown_option,       ///< "unknown option --bogus"
    missing_value,        ///< "--mtu needs a value"
    unexpected_value,     ///< "--json takes no value"
    repeated,             ///< "--port given twice"
    unexpected_argument,  ///< "unexpected argument 'stray'" (Grammar::positionals off)
  };
  Kind kind;
  std::string option;      ///< as written, without "=value": "--bogus"; or the argument
  std::string value_name;  ///< missing_value: what is missing ("a value")
  [[nodiscard]] std::string message() const;
};

/// One item of a command line.
struct Arg {
  enum class Kind { option, positional, end_of_options };
  Kind kind = Kind::positional;
  /// The option's spec name ("mtu"); empty for the other kinds.
  std::string_view name;
  /// The option's value, or the positional argument's text.
  std::string_view value;
  [[nodiscard]] bool is(std::string_view option) const {
    return kind == Kind::option && name == option;
  }
  [[nodiscard]] bool positional() const { return kind == Kind::positional; }
  /// "bad value '<value>' for --<name>", for a value the program refuses.
  [[nodiscard]] std::string bad_value() const;
};

/// What a program's command line has besides its options.
struct Grammar {
  /// Positional arguments (subcommands, names); without them each is an error.
  bool positionals = true;
  /// "--" ends the options (Arg::Kind::end_of_options; rest() holds what follows). Without it
  /// "--" is an unknown option.
  bool double_dash = false;
};

/// Reads `args` (argv[1..], or what follows a subcommand) one item at a time:
///
///     cli::ArgParser p(args, kOptions);
///     while (const auto a = p.next()) { if (a->is("mtu")) ...; }
///     if (const auto& e = p.error()) return e->message();
///
/// An argument starting with "--" is an option (unknown ones are an error); "-x" is the option
/// with short name x, or else a positional argument (a subcommand, a domain name; an error
/// unless the Grammar allows them). A value is the rest after '=' or the next argument,
/// whatever it looks like ("--control --json" sets the control path to "--json").
class ArgParser {
 public:
  ArgParser(std::span<const std::string_view> args, std::span<const OptionSpec> options,
            Grammar grammar = {})
      : args_(args), options_(options), grammar_(grammar) {}

  /// The next item, or nothing at the end and after an error (then error() says which).
  [[nodiscard]] std::optional<Arg> next();
  [[nodiscard]] const std::optional<ArgError>& error() const { return error_; }
  /// The arguments not read yet: after a subcommand's name, or after "--".
  [[nodiscard]] std::span<const std::string_view> rest() const { return args_.subspan(pos_); }
  /// Whether option `name` was read so far.
  [[nodiscard]] bool seen(std::string_view name) const { return seen_.contains(name); }

 private:
  [[nodiscard]] const OptionSpec* find_long(std::string_view name) const;
  [[nodiscard]] const OptionSpec* find_short(std::string_view arg) const;
  std::nullopt_t fail(ArgError::Kind kind, std::string_view option, std::string_view what = {});

  std::span<const std::string_view> args_;
  std::span<const OptionSpec> options_;
  Grammar grammar_;
  std::size_t pos_ = 0;
  std::set<std::string_view> seen_;
  std::optional<ArgError> error_;
};

}  // namespace unetback::cli
