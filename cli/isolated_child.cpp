// A probe in a child of its own (isolated_child.h).
#include "isolated_child.h"

#include <unistd.h>

#include <climits>

namespace mrcheck::cli {

result<child_outcome> run_self_isolated(std::string_view probe, const args& original,
                                        std::chrono::milliseconds timeout) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return status::error("cannot find my own executable (/proc/self/exe) for --timeout");
  self[n] = '\0';
  child_spec spec;
  spec.argv = {self, "probe", std::string(probe)};
  for (std::size_t i = 0; i < original.size(); ++i) {
    if (original[i] == "--timeout") {
      ++i;
      continue;
    }
    if (original[i].starts_with("--timeout=")) continue;
    spec.argv.push_back(original[i]);
  }
  spec.argv.push_back("--isolated-child");
  spec.env = current_environment();
  spec.timeout = timeout;
  spec.reset_oom_score_adj = false;
  return run_child(spec);
}

std::string last_call(std::string_view err) {
  auto pos = err.rfind(": calling ");
  if (pos == std::string_view::npos) return "";
  auto end = err.find('\n', pos);
  return std::string(err.substr(pos + 10, end == std::string_view::npos ? std::string_view::npos : end - pos - 10));
}

}  // namespace mrcheck::cli
