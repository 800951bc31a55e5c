// parse_nccl_line() and errno_in_text(): one line of a job's output, written by the job (so by the user) and read
// by `mrcheck explain` and by the NCCL smoke test. Untrusted and arbitrary: binary, huge, hostile.
// Invariants: every string an event carries (text, host, call, peer, provider, detail) is printable ASCII and
// bounded (text 300, host 64, peer 80), a transport is one of the documented names, a rank is never negative,
// an errno is 0 or a small positive number, the result is the same with a trailing "\r\n", and only the first
// 64 KiB of a line matter.
#include "fuzz_common.h"

#include <mrcheck/nccl_log.h>

namespace {

void check_event(const mrcheck::nccl_event& e, std::string_view line) {
  using mrcheck::fuzz::printable_ascii;
  MRCHECK_FUZZ_REQUIRE(printable_ascii(e.text) && e.text.size() <= 300, e.text);
  MRCHECK_FUZZ_REQUIRE(printable_ascii(e.host) && e.host.size() <= 64, e.host);
  MRCHECK_FUZZ_REQUIRE(printable_ascii(e.what.call) && e.what.call.size() <= 128, e.what.call);
  MRCHECK_FUZZ_REQUIRE(printable_ascii(e.what.peer) && e.what.peer.size() <= 80, e.what.peer);
  MRCHECK_FUZZ_REQUIRE(printable_ascii(e.what.provider) && e.what.provider.size() <= 64, e.what.provider);
  MRCHECK_FUZZ_REQUIRE(printable_ascii(e.what.detail) && e.what.detail.size() <= 64, e.what.detail);
  MRCHECK_FUZZ_REQUIRE(e.what.transport.empty() || e.what.transport == "ofi" || e.what.transport == "libfabric" ||
                           e.what.transport == "kernel" || e.what.transport == "ucx",
                       e.what.transport);
  MRCHECK_FUZZ_REQUIRE(e.what.err >= 0 && e.what.err < 4096, line);
  if (e.rank) MRCHECK_FUZZ_REQUIRE(*e.rank >= 0, line);
  if (e.pid) MRCHECK_FUZZ_REQUIRE(*e.pid >= 0, line);
  if (e.what.wc_status) MRCHECK_FUZZ_REQUIRE(*e.what.wc_status >= 0, line);
}

bool same_event(const std::optional<mrcheck::nccl_event>& a, const std::optional<mrcheck::nccl_event>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a) return true;
  return a->what.what == b->what.what && a->what.call == b->what.call && a->what.err == b->what.err &&
         a->what.wc_status == b->what.wc_status && a->what.peer == b->what.peer && a->host == b->host &&
         a->what.transport == b->what.transport && a->what.provider == b->what.provider &&
         a->what.detail == b->what.detail && a->what.log_memlock == b->what.log_memlock && a->pid == b->pid &&
         a->rank == b->rank && a->text == b->text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view line = fuzz::as_text(data, size);
  int err = errno_in_text(line);
  MRCHECK_FUZZ_REQUIRE(err >= 0 && err < 4096, line);

  auto ev = parse_nccl_line(line);
  if (ev) check_event(*ev, line);
  // Line endings from a Windows editor or a pty do not change the verdict.
  if (line.size() < 64 * 1024 && line.find('\n') == std::string_view::npos) {
    std::string crlf = std::string(line) + "\r\n";
    MRCHECK_FUZZ_REQUIRE(same_event(ev, parse_nccl_line(crlf)), line);
  }
  return 0;
}
