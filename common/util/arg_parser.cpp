#include "common/util/arg_parser.hpp"

namespace unetback::cli {

std::string ArgError::message() const {
  switch (kind) {
    case Kind::unknown_option: return "unknown option " + option;
    case Kind::missing_value: return option + " needs " + value_name;
    case Kind::unexpected_value: return option + " takes no value";
    case Kind::repeated: return option + " given twice";
    case Kind::unexpected_argument: return "unexpected argument '" + option + "'";
  }
  return option;
}

std::string Arg::bad_value() const {
  return "bad value '" + std::string(value) + "' for --" + std::string(name);
}

const OptionSpec* ArgParser::find_long(std::string_view name) const {
  for (const auto& o : options_)
    if (o.name == name) return &o;
  return nullptr;
}

const OptionSpec* ArgParser::find_short(std::string_view arg) const {
  if (arg.size() != 2 || arg[0] != '-' || arg[1] == '-') return nullptr;
  for (const auto& o : options_)
    if (o.short_name != '\0' && o.short_name == arg[1]) return &o;
  return nullptr;
}

std::nullopt_t ArgParser::fail(ArgError::Kind kind, std::string_view option,
                               std::string_view what) {
  error_ = ArgError{kind, std::string(option), std::string(what)};
  pos_ = args_.size();
  return std::nullopt;
}

std::optional<Arg> ArgParser::next() {
  if (error_ || pos_ >= args_.size()) return std::nullopt;
  const std::string_view arg = args_[pos_++];
  if (arg == "--" && grammar_.double_dash) return Arg{Arg::Kind::end_of_options, {}, {}};
  std::string_view written = arg;  // the option as written, without "=value"
  std::optional<std::string_view> inline_value;
  const OptionSpec* spec = nullptr;
  if (arg.starts_with("--")) {
    if (const auto eq = arg.find('='); eq != std::string_view::npos) {
      written = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    spec = find_long(written.substr(2));
    if (spec == nullptr) return fail(ArgError::Kind::unknown_option, written);
  } else {
    spec = find_short(arg);
    if (spec == nullptr && !grammar_.positionals)
      return fail(ArgError::Kind::unexpected_argument, arg);
    if (spec == nullptr) return Arg{Arg::Kind::positional, {}, arg};
  }
  if (!seen_.insert(spec->name).second && spec->once)
    return fail(ArgError::Kind::repeated, written);
  if (!spec->takes_value) {
    if (inline_value) return fail(ArgError::Kind::unexpected_value, written);
    return Arg{Arg::Kind::option, spec->name, {}};
  }
  if (inline_value) return Arg{Arg::Kind::option, spec->name, *inline_value};
  if (pos_ >= args_.size()) {
    return fail(ArgError::Kind::missing_value, written,
                spec->value_name.empty() ? std::string_view("a value") : spec->value_name);
  }
  return Arg{Arg::Kind::option, spec->name, args_[pos_++]};
}

}  // namespace unetback::cli
