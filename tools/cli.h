// A small command-line parser shared by the uscm subcommands: GNU-style
// "--name=value" / "--name value" / "--flag" / "--no-flag", positional
// arguments, "--help", and the exit-code convention of every subcommand.
#ifndef USCM_TOOLS_CLI_H_
#define USCM_TOOLS_CLI_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/optional.h"

namespace uscm::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the command ran and something failed
inline constexpr int kExitUsage = 2;    // bad command line: nothing was done

class FlagSet {
 public:
  // `usage` is the synopsis after "uscm": "demo [options]".
  FlagSet(std::string usage, std::string description);

  void String(const char* name, std::string* value, const char* help);
  void Int(const char* name, int64_t* value, const char* help, int64_t min = INT64_MIN,
           int64_t max = INT64_MAX);
  void Double(const char* name, double* value, const char* help, double min, double max);
  void Bool(const char* name, bool* value, const char* help);
  // Extra text printed after the option list (examples, exit codes).
  void Epilog(std::string text) { epilog_ = std::move(text); }

  // Parses argv[0..argc) (argv[0] is the first argument, not the program).
  // Returns nullopt to go on; otherwise the exit code to return at once
  // (0 after --help printed the usage to stdout, 2 after an error was printed
  // to stderr).
  absl::optional<int> Parse(int argc, char** argv, std::vector<std::string>* positional);
  std::string Usage() const;

 private:
  enum class Kind : uint8_t { kString, kInt, kDouble, kBool };
  struct Flag {
    std::string name;
    Kind kind;
    void* target;
    std::string help;
    int64_t imin = 0, imax = 0;
    double dmin = 0, dmax = 0;
  };
  const Flag* Find(const std::string& name) const;
  absl::Status Set(const Flag& f, const std::string& value);

  std::string usage_;
  std::string description_;
  std::string epilog_;
  std::vector<Flag> flags_;
};

// "uscm demo: ..." on stderr, plus "Try 'uscm demo --help'." for usage errors.
int UsageError(const char* command, const std::string& message);
int Failure(const char* command, const std::string& message);

}  // namespace uscm::tools

#endif  // USCM_TOOLS_CLI_H_
