#include "mad/capture/tshark_decode.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "mad/capture/pcap_reader.h"
#include "mad/capture/pcap_writer.h"

extern char** environ;

namespace uscm::mad::capture {
namespace {

// Document order matters: a field's occurrences across subtrees are listed in
// tree order. (tshark 4.0's --no-duplicate-keys already merged repeated keys
// of one object into an array.)
using Json = nlohmann::ordered_json;

// CM private-data heuristics that take over frames (wire notes, Q7). One flag
// per protocol: tshark 4.0 silently ignores comma-separated lists.
constexpr const char* kDisabledProtocols[] = {"infiniband_sdp", "iser", "nvme-rdma", "lnet"};

const std::vector<TsharkField>& NoFields() {
  static const auto* const kEmpty = new std::vector<TsharkField>();
  return *kEmpty;
}

struct ProcessResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs argv[0] with `env`, collecting stdout and stderr.
absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& args,
                                         const std::vector<std::string>& env) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return absl::InternalError("pipe failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> argv, envp;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", args[0], ": ", std::strerror(rc)));
  }
  ProcessResult result;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::vector<std::string> ChildEnvironment() {
  std::vector<std::string> env;
  bool has_home = false;
  for (char** e = environ; *e != nullptr; ++e) {
    if (absl::StartsWith(*e, "HOME=") && (*e)[5] != '\0') has_home = true;
    if (absl::StartsWith(*e, "HOME=") && (*e)[5] == '\0') continue;
    env.emplace_back(*e);
  }
  if (!has_home) {
    // tshark reads profiles from $HOME; Bazel's test sandbox may not set it.
    const char* tmp = std::getenv("TEST_TMPDIR");
    env.push_back(absl::StrCat("HOME=", tmp != nullptr ? tmp : "/tmp"));
  }
  return env;
}

std::string TempDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp != nullptr ? tmp : "/tmp";
}

// A non-negative integer (tshark writes offsets, lengths and masks as JSON
// numbers; a 64-bit mask may exceed int64).
absl::optional<int64_t> NonNegative(const Json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    return u <= uint64_t{INT64_MAX} ? absl::optional<int64_t>(static_cast<int64_t>(u))
                                    : absl::nullopt;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return v.get<int64_t>();
  return absl::nullopt;
}

bool IsRawEntry(const Json& v) { return v.is_array() && v.size() >= 4 && v[0].is_string(); }

// One X_raw entry: [hex, offset, length, bitmask, ftype].
absl::Status ReadRaw(const Json& raw, TsharkField& f) {
  if (!IsRawEntry(raw)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tshark JSON: ", f.name, "_raw is not [hex, offset, length, mask, type]"));
  }
  absl::optional<int64_t> off = NonNegative(raw[1]);
  absl::optional<int64_t> len = NonNegative(raw[2]);
  absl::optional<int64_t> mask = NonNegative(raw[3]);
  if (!off || !len || !mask) {
    return absl::InvalidArgumentError(
        absl::StrCat("tshark JSON: ", f.name, "_raw has a bad offset, length or mask"));
  }
  f.raw_hex = raw[0].get<std::string>();
  f.frame_offset = *off;
  f.length = *len;
  f.mask = static_cast<uint64_t>(*mask);
  return absl::OkStatus();
}

// Collects every named field under `node`, in tree order.
absl::Status Flatten(const Json& node,
                     std::map<std::string, std::vector<TsharkField>, std::less<>>& out) {
  if (node.is_array()) {
    for (const Json& item : node) {
      if (absl::Status s = Flatten(item, out); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (!node.is_object()) return absl::OkStatus();
  for (const auto& [key, value] : node.items()) {
    if (absl::EndsWith(key, "_raw")) continue;  // read with its field below
    // A field's value is a string, or (repeated) an array of strings.
    std::vector<const Json*> shows;
    if (value.is_string()) {
      shows.push_back(&value);
    } else if (value.is_array() && !value.empty() && value[0].is_string()) {
      for (const Json& v : value) {
        if (!v.is_string()) {
          return absl::InvalidArgumentError(
              absl::StrCat("tshark JSON: ", key, " mixes strings and other values"));
        }
        shows.push_back(&v);
      }
    } else {
      if (absl::Status s = Flatten(value, out); !s.ok()) return s;
      continue;
    }
    std::vector<const Json*> raws;
    if (auto raw = node.find(absl::StrCat(key, "_raw")); raw != node.end()) {
      if (IsRawEntry(*raw)) {
        raws.push_back(&*raw);
      } else if (raw->is_array()) {
        for (const Json& r : *raw) raws.push_back(&r);
      }
      if (raws.size() != shows.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("tshark JSON: ", key, " has ", shows.size(), " values but ",
                         raws.size(), " _raw entries"));
      }
    }
    std::vector<TsharkField>& list = out[key];
    for (size_t k = 0; k < shows.size(); ++k) {
      TsharkField f;
      f.name = key;
      f.show = shows[k]->get<std::string>();
      if (!raws.empty()) {
        if (absl::Status s = ReadRaw(*raws[k], f); !s.ok()) return s;
      }
      list.push_back(std::move(f));
    }
  }
  return absl::OkStatus();
}

// nlohmann's parser reports errors by exception; this is the one place one
// can be thrown, and it becomes a Status here.
absl::StatusOr<Json> ParseDocument(absl::string_view text) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat("tshark JSON: ", e.what()));
  }
}

}  // namespace

absl::optional<uint64_t> TsharkField::AsUint() const {
  uint64_t v = 0;
  if (absl::StartsWith(show, "0x") || absl::StartsWith(show, "0X")) {
    if (show.size() > 2 && absl::SimpleHexAtoi(absl::string_view(show).substr(2), &v)) {
      return v;
    }
    return absl::nullopt;
  }
  if (absl::SimpleAtoi(show, &v)) return v;
  return absl::nullopt;
}

const std::vector<TsharkField>& TsharkFrame::GetAll(absl::string_view name) const {
  auto it = fields_.find(name);
  return it == fields_.end() ? NoFields() : it->second;
}

absl::StatusOr<TsharkField> TsharkFrame::Get(absl::string_view name) const {
  const std::vector<TsharkField>& all = GetAll(name);
  if (all.size() == 1) return all[0];
  return absl::NotFoundError(absl::StrCat("tshark frame ", number, " has ", all.size(),
                                          " occurrences of ", name, " (expected 1)"));
}

void TsharkFrame::SetMadStart(int64_t frame_offset) {
  for (auto& [name, list] : fields_) {
    for (TsharkField& f : list) {
      if (f.frame_offset) f.mad_offset = *f.frame_offset - frame_offset;
    }
  }
}

std::vector<std::string> TsharkArguments(const TsharkOptions& options) {
  std::vector<std::string> args = {options.binary, "-n", "-T", "json", "-x",
                                   "--no-duplicate-keys"};
  for (const char* p : kDisabledProtocols) {
    args.push_back("--disable-protocol");
    args.push_back(p);
  }
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  return args;
}

absl::StatusOr<std::vector<TsharkFrame>> ParseTsharkJson(
    absl::string_view json, std::span<const int64_t> packet_starts,
    std::span<const int64_t> mad_starts) {
  absl::StatusOr<Json> doc = ParseDocument(json);
  if (!doc.ok()) return doc.status();
  if (!doc->is_array()) {
    return absl::InvalidArgumentError("tshark JSON: top level is not an array of frames");
  }
  std::vector<TsharkFrame> frames;
  for (const Json& packet : *doc) {
    const Json* layers = nullptr;
    if (packet.is_object()) {
      auto source = packet.find("_source");
      if (source != packet.end() && source->is_object()) {
        auto l = source->find("layers");
        if (l != source->end() && l->is_object()) layers = &*l;
      }
    }
    if (layers == nullptr) {
      return absl::InvalidArgumentError("tshark JSON: a frame has no _source.layers object");
    }
    TsharkFrame frame;
    if (absl::Status s = Flatten(*layers, frame.fields_); !s.ok()) return s;
    absl::StatusOr<TsharkField> number = frame.Get("frame.number");
    if (!number.ok() || !absl::SimpleAtoi(number->show, &frame.number) || frame.number < 1) {
      return absl::InvalidArgumentError("tshark JSON: a frame has no valid frame.number");
    }
    if (absl::StatusOr<TsharkField> p = frame.Get("frame.protocols"); p.ok()) {
      frame.protocols = p->show;
    }
    const size_t index = static_cast<size_t>(frame.number - 1);
    const int64_t packet_start = index < packet_starts.size() ? packet_starts[index] : -1;
    const int64_t mad_start = index < mad_starts.size() ? mad_starts[index] : -1;
    for (auto& [name, list] : frame.fields_) {
      for (TsharkField& f : list) {
        if (!f.frame_offset) continue;
        if (packet_start >= 0) f.packet_offset = *f.frame_offset - packet_start;
        if (mad_start >= 0) f.mad_offset = *f.frame_offset - mad_start;
      }
    }
    frames.push_back(std::move(frame));
  }
  return frames;
}

absl::StatusOr<std::vector<TsharkFrame>> DecodeWithTshark(const std::string& pcap_path,
                                                          const TsharkOptions& options) {
  if (access(options.binary.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "tshark not found at ", options.binary,
        ": run tools/setup.sh (installs the Debian package tshark) before these tests"));
  }
  // Where the LRH and the MAD sit in each frame, from our own reader. tshark
  // keeps exported-PDU tags in the frame but moves the ERF header into the
  // pseudo-header, so ERF frames start at the LRH.
  absl::StatusOr<PcapContents> contents = ReadPcapFile(pcap_path);
  if (!contents.ok()) return contents.status();
  std::vector<int64_t> packet_starts, mad_starts;
  for (const PcapRecord& r : contents->records) {
    const int64_t start = contents->link_type == CaptureLinkType::kErf
                              ? 0
                              : static_cast<int64_t>(r.packet_offset);
    absl::StatusOr<ParsedUdPacket> parsed = ParseUdPacket(r.packet);
    packet_starts.push_back(start);
    mad_starts.push_back(parsed.ok() ? start + static_cast<int64_t>(parsed->mad_offset) : -1);
  }
  std::vector<std::string> args = TsharkArguments(options);
  args.push_back("-r");
  args.push_back(pcap_path);
  absl::StatusOr<ProcessResult> run = RunProcess(args, ChildEnvironment());
  if (!run.ok()) return run.status();
  if (run->exit_code != 0) {
    return absl::InternalError(absl::StrCat("`", absl::StrJoin(args, " "), "` exited with ",
                                            run->exit_code, ": ", run->err));
  }
  absl::StatusOr<std::vector<TsharkFrame>> frames =
      ParseTsharkJson(run->out, packet_starts, mad_starts);
  if (!frames.ok()) return frames.status();
  if (options.extra_args.empty() && frames->size() != contents->records.size()) {
    return absl::InternalError(absl::StrCat("tshark decoded ", frames->size(),
                                            " frames; the capture holds ",
                                            contents->records.size()));
  }
  return frames;
}

absl::StatusOr<std::vector<TsharkFrame>> DecodeCaptureWithTshark(
    const std::string& path, const TsharkOptions& options) {
  if (access(options.binary.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "tshark not found at ", options.binary,
        ": run tools/setup.sh (installs the Debian package tshark)"));
  }
  std::vector<std::string> args = TsharkArguments(options);
  args.push_back("-r");
  args.push_back(path);
  absl::StatusOr<ProcessResult> run = RunProcess(args, ChildEnvironment());
  if (!run.ok()) return run.status();
  if (run->exit_code != 0) {
    return absl::InternalError(absl::StrCat("`", absl::StrJoin(args, " "), "` exited with ",
                                            run->exit_code, ": ", run->err));
  }
  absl::StatusOr<std::vector<TsharkFrame>> frames = ParseTsharkJson(run->out, {}, {});
  if (!frames.ok()) return frames.status();
  for (TsharkFrame& frame : *frames) {
    const std::vector<TsharkField>& base = frame.GetAll("infiniband.mad.baseversion");
    if (!base.empty() && base.front().frame_offset) frame.SetMadStart(*base.front().frame_offset);
  }
  return frames;
}

absl::StatusOr<std::vector<TsharkFrame>> DecodeMadsWithTshark(
    const std::vector<std::vector<uint8_t>>& mads, const UdHeaders& headers,
    CaptureLinkType link_type, const TsharkOptions& options) {
  static int counter = 0;
  const std::string path =
      absl::StrCat(TempDir(), "/tshark-", getpid(), "-", ++counter, ".pcap");
  {
    absl::StatusOr<std::unique_ptr<PcapWriter>> writer = PcapWriter::Create(path, link_type);
    if (!writer.ok()) return writer.status();
    for (size_t i = 0; i < mads.size(); ++i) {
      absl::StatusOr<std::vector<uint8_t>> packet = WrapMad(headers, mads[i]);
      if (!packet.ok()) return packet.status();
      // One second apart, from 2023-11-14 (any time works; this one is readable).
      const TimePoint t = TimePoint::FromNanos((1700000000 + static_cast<int64_t>(i)) *
                                               int64_t{1000000000});
      if (absl::Status s = (*writer)->WritePacket(t, *packet); !s.ok()) return s;
    }
    if (absl::Status s = (*writer)->Close(); !s.ok()) return s;
  }
  absl::StatusOr<std::vector<TsharkFrame>> frames = DecodeWithTshark(path, options);
  std::remove(path.c_str());
  return frames;
}

}  // namespace uscm::mad::capture
