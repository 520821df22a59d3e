#include "tools/cli.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace uscm::tools {

FlagSet::FlagSet(std::string usage, std::string description)
    : usage_(std::move(usage)), description_(std::move(description)) {}

void FlagSet::String(const char* name, std::string* value, const char* help) {
  flags_.push_back({name, Kind::kString, value, help});
}

void FlagSet::Int(const char* name, int64_t* value, const char* help, int64_t min, int64_t max) {
  Flag f{name, Kind::kInt, value, help};
  f.imin = min;
  f.imax = max;
  flags_.push_back(f);
}

void FlagSet::Double(const char* name, double* value, const char* help, double min, double max) {
  Flag f{name, Kind::kDouble, value, help};
  f.dmin = min;
  f.dmax = max;
  flags_.push_back(f);
}

void FlagSet::Bool(const char* name, bool* value, const char* help) {
  flags_.push_back({name, Kind::kBool, value, help});
}

const FlagSet::Flag* FlagSet::Find(const std::string& name) const {
  for (const Flag& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::Status FlagSet::Set(const Flag& f, const std::string& value) {
  switch (f.kind) {
    case Kind::kString:
      *static_cast<std::string*>(f.target) = value;
      return absl::OkStatus();
    case Kind::kInt: {
      int64_t v = 0;
      if (!absl::SimpleAtoi(value, &v)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", f.name, "=", value, " is not an integer"));
      }
      if (v < f.imin || v > f.imax) {
        return absl::InvalidArgumentError(absl::StrCat("--", f.name, "=", value, " is out of range [",
                                                       f.imin, ", ", f.imax, "]"));
      }
      *static_cast<int64_t*>(f.target) = v;
      return absl::OkStatus();
    }
    case Kind::kDouble: {
      double v = 0;
      if (!absl::SimpleAtod(value, &v)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", f.name, "=", value, " is not a number"));
      }
      if (!(v >= f.dmin && v <= f.dmax)) {
        return absl::InvalidArgumentError(absl::StrCat("--", f.name, "=", value,
                                                       " is out of range [", f.dmin, ", ",
                                                       f.dmax, "]"));
      }
      *static_cast<double*>(f.target) = v;
      return absl::OkStatus();
    }
    case Kind::kBool:
      if (value == "true" || value == "1" || value == "yes") {
        *static_cast<bool*>(f.target) = true;
      } else if (value == "false" || value == "0" || value == "no") {
        *static_cast<bool*>(f.target) = false;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("--", f.name, "=", value, " is not true or false"));
      }
      return absl::OkStatus();
  }
  return absl::InternalError("unknown flag kind");
}

absl::optional<int> FlagSet::Parse(int argc, char** argv, std::vector<std::string>* positional) {
  const std::string command = usage_.substr(0, usage_.find(' '));
  bool only_positional = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (only_positional || arg.size() < 2 || arg[0] != '-') {
      positional->push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_positional = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      std::fputs(Usage().c_str(), stdout);
      return kExitOk;
    }
    if (!absl::StartsWith(arg, "--")) {
      return UsageError(command.c_str(), absl::StrCat("unknown option '", arg, "'"));
    }
    std::string name = arg.substr(2);
    absl::optional<std::string> value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const Flag* f = Find(name);
    if (f == nullptr && !value.has_value() && absl::StartsWith(name, "no-")) {
      const Flag* neg = Find(name.substr(3));
      if (neg != nullptr && neg->kind == Kind::kBool) {
        *static_cast<bool*>(neg->target) = false;
        continue;
      }
    }
    if (f == nullptr) {
      return UsageError(command.c_str(), absl::StrCat("unknown option '--", name, "'"));
    }
    if (!value.has_value()) {
      if (f->kind == Kind::kBool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return UsageError(command.c_str(), absl::StrCat("--", name, " needs a value"));
      }
    }
    if (absl::Status s = Set(*f, *value); !s.ok()) {
      return UsageError(command.c_str(), std::string(s.message()));
    }
  }
  return absl::nullopt;
}

std::string FlagSet::Usage() const {
  std::string out = absl::StrCat("Usage: uscm ", usage_, "\n\n", description_, "\n");
  if (!flags_.empty()) absl::StrAppend(&out, "\nOptions:\n");
  for (const Flag& f : flags_) {
    std::string lhs = absl::StrCat("  --", f.name);
    switch (f.kind) {
      case Kind::kString: absl::StrAppend(&lhs, "=S"); break;
      case Kind::kInt: absl::StrAppend(&lhs, "=N"); break;
      case Kind::kDouble: absl::StrAppend(&lhs, "=X"); break;
      case Kind::kBool: break;
    }
    std::string def;
    switch (f.kind) {
      case Kind::kString: {
        const auto& s = *static_cast<const std::string*>(f.target);
        if (!s.empty()) def = absl::StrCat(" (default ", s, ")");
        break;
      }
      case Kind::kInt:
        def = absl::StrCat(" (default ", *static_cast<const int64_t*>(f.target), ")");
        break;
      case Kind::kDouble:
        def = absl::StrCat(" (default ", *static_cast<const double*>(f.target), ")");
        break;
      case Kind::kBool:
        if (*static_cast<const bool*>(f.target)) def = " (default on; --no-" + f.name + ")";
        break;
    }
    absl::StrAppendFormat(&out, "%-24s %s%s\n", lhs, f.help, def);
  }
  absl::StrAppend(&out, "  --help                   this text\n");
  if (!epilog_.empty()) absl::StrAppend(&out, "\n", epilog_);
  absl::StrAppend(&out, "\nExit status: 0 ok, 1 failure while running, 2 bad command line.\n");
  return out;
}

int UsageError(const char* command, const std::string& message) {
  std::fprintf(stderr, "uscm %s: %s\nTry 'uscm %s --help'.\n", command, message.c_str(), command);
  return kExitUsage;
}

int Failure(const char* command, const std::string& message) {
  std::fprintf(stderr, "uscm %s: %s\n", command, message.c_str());
  return kExitFailure;
}

}  // namespace uscm::tools
