// The data-plane probe's traffic on one connected pair (dp_session.h): a send/recv ping-pong (A sends, B echoes
// what it received) for the latency, back-to-back RDMA writes for the bandwidth. Every wait has a deadline;
// every message carries a stamp checked on arrival, and the last one of each kind is compared byte for byte.
#include "rdma/dp_session.h"

#if MRCHECK_HAVE_DP_VERBS

#include <mrcheck/diagnosis.h>

#include <fmt/format.h>

#include <cstring>
#include <vector>

namespace mrcheck::dp {

namespace {

using clock = std::chrono::steady_clock;

enum wr_kind : std::uint64_t { k_send = 1, k_recv = 2, k_write = 3 };
constexpr std::uint64_t k_stamp_base = 0x6d72636865636b00ull;  // "mrcheck" and the iteration below

std::string_view kind_name(std::uint64_t wr_id, int side) {
  switch (wr_id & 0xff) {
    case k_send: return side == 0 ? "the send" : "the echo's send";
    case k_recv: return side == 0 ? "the echo's receive" : "the receive";
    case k_write: return "the RDMA write";
  }
  return "a work request";
}

void fill_pattern(unsigned char* p, std::uint64_t size) {
  for (std::uint64_t j = 0; j < size; ++j) p[j] = static_cast<unsigned char>((j * 131 + size * 7 + 0x5a) & 0xff);
}

// The stamp of message `i` in its first and (when there is room) last 8 bytes.
void stamp(unsigned char* p, std::uint64_t size, std::uint64_t i) {
  std::uint64_t v = k_stamp_base + i;
  std::memcpy(p, &v, size < 8 ? size : 8);
  if (size >= 16) std::memcpy(p + size - 8, &v, 8);
}

bool stamped(const unsigned char* p, std::uint64_t size, std::uint64_t i) {
  unsigned char want[16];
  stamp(want, size < 16 ? size : 16, i);
  if (std::memcmp(p, want, size < 8 ? size : 8) != 0) return false;
  return size < 16 || std::memcmp(p + size - 8, want + 8, 8) == 0;
}

failure mismatch(std::string step, std::string what) {
  return failure{std::move(step), "mismatch", 0, "", std::move(what)};
}

// Compares `size` bytes; a failure names the first byte that differs.
std::optional<failure> compare(const unsigned char* got, const unsigned char* want, std::uint64_t size,
                               std::string_view what) {
  if (std::memcmp(got, want, size) == 0) return std::nullopt;
  std::uint64_t j = 0;
  while (j < size && got[j] == want[j]) ++j;
  return mismatch("verify", fmt::format("{} of {} bytes arrived different: byte {} is {:#04x}, sent {:#04x}", what,
                                        size, j, got[j], want[j]));
}

int post_recv(session& s, int side, unsigned char* addr, std::uint64_t size) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(addr), static_cast<std::uint32_t>(size), s.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = k_recv;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(s.qp[side], &wr, &bad);
}

int post_send(session& s, int side, ibv_wr_opcode op, unsigned char* addr, std::uint64_t size, unsigned char* remote) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(addr), static_cast<std::uint32_t>(size), s.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = op == IBV_WR_RDMA_WRITE ? k_write : k_send;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (op == IBV_WR_RDMA_WRITE) {
    // A node pair writes into the peer's memory, the loopback into B's region of this registration.
    wr.wr.rdma.remote_addr = s.remote ? s.remote_addr : reinterpret_cast<std::uintptr_t>(remote);
    wr.wr.rdma.rkey = s.remote ? s.remote_rkey : s.mr->rkey;
  }
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(s.qp[side], &wr, &bad);
}

// "IBV_WC_RETRY_EXC_ERR" (diagnosis.h's table), "IBV_WC_<n>" for a status it does not know.
std::string wc_name(int status) {
  std::string_view n = wc_status_name(status);
  return n.empty() ? fmt::format("IBV_WC_{}", status) : std::string(n);
}

// Waits for want[0] completions on A's CQ and want[1] on B's, at most s.wait: both CQs are polled, so a failed
// send on one side is reported as itself, not as the other side's receive that never came. A receive must carry
// `recv_len` bytes.
std::optional<failure> await(session& s, int want_a, int want_b, std::uint64_t recv_len, std::string_view what) {
  int want[2] = {want_a, want_b};
  auto deadline = clock::now() + s.wait;
  unsigned spins = 0;
  while (want[0] > 0 || want[1] > 0) {
    int got_any = 0;
    for (int side = 0; side < 2; ++side) {
      if (want[side] <= 0) continue;
      ibv_wc wc[4];
      int got = ibv_poll_cq(s.cq[side], want[side] < 4 ? want[side] : 4, wc);
      if (got < 0) return call_failed("poll_cq", "ibv_poll_cq", got);
      for (int k = 0; k < got; ++k) {
        if (wc[k].status != IBV_WC_SUCCESS) {
          const char* text = s.v->wc_status_str(wc[k].status);
          return failure{"completion", "completion", 0, wc_name(wc[k].status),
                         fmt::format("{} ({} bytes) completed with {} ({}), vendor error {:#x}",
                                     kind_name(wc[k].wr_id, side), recv_len, wc_name(wc[k].status),
                                     text != nullptr ? text : "?", wc[k].vendor_err)};
        }
        if ((wc[k].wr_id & 0xff) == k_recv && wc[k].byte_len != recv_len) {
          return mismatch("completion", fmt::format("{} completed with {} bytes, {} were sent",
                                                    kind_name(wc[k].wr_id, side), wc[k].byte_len, recv_len));
        }
      }
      want[side] -= got;
      got_any += got;
    }
    if (got_any == 0 && (++spins & 0xff) == 0 && clock::now() > deadline) {
      return failure{"poll_cq", "timeout", 0, "",
                     fmt::format("no completion of {} within {} ms ({} missing): the packets went nowhere", what,
                                 s.wait.count(), want[0] + want[1])};
    }
  }
  return std::nullopt;
}

double micros(clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

std::optional<failure> ping_pong(session& s, std::uint64_t size, int iters, rdma_size_result& out) {
  if (int rc = post_recv(s, 1, s.b_rx(), size)) return call_failed("post_recv", "ibv_post_recv", rc);
  if (int rc = post_recv(s, 0, s.a_rx(), size)) return call_failed("post_recv", "ibv_post_recv", rc);
  auto t0 = clock::now();
  for (int i = 0; i < iters; ++i) {
    stamp(s.a_tx(), size, static_cast<std::uint64_t>(i));
    if (int rc = post_send(s, 0, IBV_WR_SEND, s.a_tx(), size, nullptr)) {
      return call_failed("post_send", "ibv_post_send", rc);
    }
    if (auto f = await(s, 1, 1, size, "the send and its receive")) return f;
    if (!stamped(s.b_rx(), size, static_cast<std::uint64_t>(i))) {
      return mismatch("verify", fmt::format("send {} of {} bytes arrived without its stamp", i, size));
    }
    // The next message's receives, none after the last: the next size must find its queues empty.
    const bool more = i + 1 < iters;
    if (more) {
      if (int rc = post_recv(s, 1, s.b_rx(), size)) return call_failed("post_recv", "ibv_post_recv", rc);
    }
    if (int rc = post_send(s, 1, IBV_WR_SEND, s.b_rx(), size, nullptr)) {
      return call_failed("post_send", "ibv_post_send", rc);
    }
    if (auto f = await(s, 1, 1, size, "the echo and its receive")) return f;
    if (!stamped(s.a_rx(), size, static_cast<std::uint64_t>(i))) {
      return mismatch("verify", fmt::format("echo {} of {} bytes arrived without its stamp", i, size));
    }
    if (more) {
      if (int rc = post_recv(s, 0, s.a_rx(), size)) return call_failed("post_recv", "ibv_post_recv", rc);
    }
  }
  out.send_latency_us = micros(clock::now() - t0) / iters / 2;
  if (auto f = compare(s.b_rx(), s.a_tx(), size, "the last send")) return f;
  return compare(s.a_rx(), s.a_tx(), size, "the last echo");
}

std::optional<failure> writes(session& s, std::uint64_t size, int iters, rdma_size_result& out) {
  stamp(s.a_tx(), size, 0xffff);
  std::memset(s.b_rx(), 0, size);
  int posted = 0;
  int done = 0;
  auto t0 = clock::now();
  while (done < iters) {
    while (posted < iters && posted - done < k_queue_depth) {
      if (int rc = post_send(s, 0, IBV_WR_RDMA_WRITE, s.a_tx(), size, s.b_rx())) {
        return call_failed("post_send", "ibv_post_send (RDMA write)", rc);
      }
      ++posted;
    }
    if (auto f = await(s, 1, 0, size, "the RDMA write")) return f;
    ++done;
  }
  double us = micros(clock::now() - t0);
  out.write_mbps = us > 0 ? static_cast<double>(size) * iters / us : 0;
  // A node pair's writes landed on the peer, which checks them (pair_verify_written).
  if (s.remote) return std::nullopt;
  return compare(s.b_rx(), s.a_tx(), size, "the RDMA write");
}

// What A's writes leave in B's region: A's source after fill_pattern and the writes' stamp.
void written_pattern(unsigned char* p, std::uint64_t size) {
  fill_pattern(p, size);
  stamp(p, size, 0xffff);
}

}  // namespace

std::optional<failure> pair_send(session& s, std::uint64_t size, int iters, rdma_size_result& out) {
  out.size = size;
  out.iters = iters;
  fill_pattern(s.a_tx(), size);
  if (int rc = post_recv(s, 0, s.a_rx(), size)) return call_failed("post_recv", "ibv_post_recv", rc);
  auto t0 = clock::now();
  for (int i = 0; i < iters; ++i) {
    stamp(s.a_tx(), size, static_cast<std::uint64_t>(i));
    if (int rc = post_send(s, 0, IBV_WR_SEND, s.a_tx(), size, nullptr)) {
      return call_failed("post_send", "ibv_post_send", rc);
    }
    // The send's completion and the echo's receive, both on A's CQ.
    if (auto f = await(s, 2, 0, size, "the send and the peer's echo")) return f;
    if (!stamped(s.a_rx(), size, static_cast<std::uint64_t>(i))) {
      return mismatch("verify", fmt::format("echo {} of {} bytes arrived without its stamp", i, size));
    }
    if (i + 1 < iters) {
      if (int rc = post_recv(s, 0, s.a_rx(), size)) return call_failed("post_recv", "ibv_post_recv", rc);
    }
  }
  out.send_latency_us = micros(clock::now() - t0) / iters / 2;
  if (auto f = compare(s.a_rx(), s.a_tx(), size, "the last echo")) return f;
  if (auto f = writes(s, size, iters, out)) return f;
  out.verified = true;
  return std::nullopt;
}

std::optional<failure> pair_post_first_recv(session& s, std::uint64_t size) {
  if (int rc = post_recv(s, 1, s.b_rx(), size)) return call_failed("post_recv", "ibv_post_recv", rc);
  return std::nullopt;
}

std::optional<failure> pair_echo(session& s, std::uint64_t size, int iters) {
  for (int i = 0; i < iters; ++i) {
    if (auto f = await(s, 0, 1, size, "the peer's send")) return f;
    if (!stamped(s.b_rx(), size, static_cast<std::uint64_t>(i))) {
      return mismatch("verify", fmt::format("send {} of {} bytes arrived without its stamp", i, size));
    }
    // The next receive before the echo: A sends again only once the echo arrived.
    if (i + 1 < iters) {
      if (int rc = post_recv(s, 1, s.b_rx(), size)) return call_failed("post_recv", "ibv_post_recv", rc);
    }
    if (int rc = post_send(s, 1, IBV_WR_SEND, s.b_rx(), size, nullptr)) {
      return call_failed("post_send", "ibv_post_send", rc);
    }
    if (auto f = await(s, 0, 1, size, "the echo's send")) return f;
  }
  return std::nullopt;
}

std::optional<failure> pair_verify_written(session& s, std::uint64_t size) {
  std::vector<unsigned char> want(size);
  written_pattern(want.data(), size);
  return compare(s.b_rx(), want.data(), size, "the peer's RDMA write");
}

failure call_failed(std::string step, std::string call, int err) {
  if (err < 0) err = -err;
  std::string_view name = errno_name(err);
  return failure{std::move(step), "errno", err, "",
                 fmt::format("{}: {}", call, name.empty() ? fmt::format("errno {}", err) : std::string(name))};
}

std::optional<failure> run_size(session& s, std::uint64_t size, int iters, rdma_size_result& out) {
  out.size = size;
  out.iters = iters;
  fill_pattern(s.a_tx(), size);
  log(*s.log, log_level::verbose, "probe rdma: calling ibv_post_send/ibv_poll_cq: {} x {} bytes", iters, size);
  if (auto f = ping_pong(s, size, iters, out)) return f;
  if (auto f = writes(s, size, iters, out)) return f;
  out.verified = true;
  return std::nullopt;
}

}  // namespace mrcheck::dp

#endif
