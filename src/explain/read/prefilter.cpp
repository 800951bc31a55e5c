// The cheap rejection (line_forms.h, classify): one shift-and pass over the line finds which anchors occur, those of
// the form table's rows and the scanner's listeners' own; the ordinary line, the common case, stops here.
#include "form_matchers.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace mrcheck::forms {

namespace {

struct anchor {
  std::string_view text;
  unsigned cls;
};

// Beyond the rows: the scanner's and the container evidence's own anchors (>= 5 bytes each).
constexpr anchor k_extra[] = {
    {" WARN", k_warn},
    {"WARN:", k_warn},
    {"nranks", k_rank},
    {"nRanks", k_rank},
    {"NET/IB", k_net_ib},
    {"NCCL_IB_HCA", k_env},
    {"NCCL_NET", k_env},
    {"Stack size limit", k_env},
    {"Last error:", k_form},
    {"RDMA ", k_path},
    {"DMA-BUF is", k_path},
    {"NET/Socket", k_container},
    {"pyxis", k_container},
    {"enroot", k_container},
    {"pptainer", k_container},
    {"ingularity", k_container},
    {"podman", k_container},
    {"conmon", k_container},
    {"kernel ABI", k_container},
    {"load driver", k_container},
    {"libibverbs", k_container | k_form},
    {"error", k_form},
    {"Error", k_form},
    {"ERROR", k_form},
    {"errno", k_form},
    {"ailure", k_form},
    {"FAILED", k_form},
    {"Unable", k_form},
    {"unable", k_form},
    {"Couldn't", k_form},
    {"annot ", k_form},
    {"ret=-", k_form},  // fabtests' FT_PRINTERR: "fi_enable(): util/pingpong.c:1551, ret=-22 (Invalid argument)"
};

constexpr std::size_t k_min = 5;          // the shortest anchor of the cheap rejection
constexpr std::size_t k_hash = 1u << 16;  // every bigram its own entry: no false small shifts

// Shift-and over bigrams (a bit-parallel form of the Wu-Manber filter this replaced): bit j of mask[x] says that
// bigram x is the bigram at offset j (0..3) of some anchor's window (its last k_min bytes). Per bigram of the
// line, state keeps which offsets the bigrams just read could be at; bit 3 set means the last k_min bytes may be
// a window, and only then are the anchors whose window ends with that bigram compared: the window's first four
// bytes as one 32-bit word (the fifth is the bigram's second byte), then the four bytes before it, then the rest.
// The same anchors are found as before (the check is exact; the filter only ever lets more windows pass).
// Speed: four bigrams are folded into one step (state = ((state << 4) | 15) & block, block from four independent
// table loads), so the loop-carried chain is two operations per four bytes, where Wu-Manber's skip was a chain of
// dependent loads. Bits 4-7 of every mask are set, so a bit 3 that appears inside a block is still in bits 3-6 at
// its end: one test per block, and the block is walked again only then.
struct anchor_filter {
  struct candidate {
    std::uint32_t head;   // the window's first four bytes, as load32 reads them
    std::uint32_t next;   // the four bytes before the window when the anchor has them, else 0
    std::uint16_t index;  // into anchors
  };
  std::vector<anchor> anchors;
  std::array<std::uint8_t, k_hash> mask{};
  std::array<std::uint16_t, k_hash> slot{};  // 1 + the bucket of the anchors whose window ends with bigram x
  std::vector<std::uint32_t> first;          // bucket b's candidates are [first[b - 1], first[b])
  std::vector<candidate> candidates;

  // The bigram (a, b) as a little-endian 16-bit load of the two bytes would read it.
  static std::size_t h(unsigned char a, unsigned char b) { return a | (static_cast<std::size_t>(b) << 8); }
  static std::uint32_t load32(const void* p) {
    std::uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  // Eight bytes, the first in the low byte whatever the machine's byte order.
  static std::uint64_t load64_le(const unsigned char* p) {
    std::uint64_t v;
    std::memcpy(&v, p, sizeof v);
    if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
    return v;
  }

  anchor_filter() {
    for (std::string_view a : row_anchors()) {
      if (a.size() >= k_min) anchors.push_back({a, k_form});
    }
    for (const anchor& a : k_extra) anchors.push_back(a);
    std::vector<std::vector<std::uint16_t>> bucket(k_hash);
    mask.fill(0xf0);
    for (std::size_t i = 0; i < anchors.size(); ++i) {
      std::string_view w = window(anchors[i].text);
      for (std::size_t j = 0; j + 1 < k_min; ++j) {
        mask[h(static_cast<unsigned char>(w[j]), static_cast<unsigned char>(w[j + 1]))] |= static_cast<std::uint8_t>(
            1u << j);
      }
      bucket[h(static_cast<unsigned char>(w[k_min - 2]), static_cast<unsigned char>(w[k_min - 1]))].push_back(
          static_cast<std::uint16_t>(i));
    }
    first.push_back(0);
    for (std::size_t x = 0; x < k_hash; ++x) {
      if (bucket[x].empty()) continue;
      for (std::uint16_t i : bucket[x]) {
        std::string_view a = anchors[i].text;
        std::string_view w = window(a);
        candidates.push_back({load32(w.data()), a.size() >= k_min + 4 ? load32(w.data() - 4) : 0u, i});
      }
      first.push_back(static_cast<std::uint32_t>(candidates.size()));
      slot[x] = static_cast<std::uint16_t>(first.size() - 1);
    }
  }

  // The k_min bytes the filter looks for: an anchor's last ones, which are rarer in ordinary lines than its first
  // ("NCCL error" would otherwise stop at every "NCCL INFO").
  static std::string_view window(std::string_view a) { return a.substr(a.size() - k_min); }

  // The anchors whose window is the k_min bytes at `at` (whose last bigram is x), added to cls.
  unsigned check(const unsigned char* p, std::size_t at, std::size_t x, unsigned cls) const {
    const std::uint32_t head = load32(p + at);
    const std::size_t b = slot[x];
    for (std::uint32_t c = first[b - 1]; c < first[b]; ++c) {
      if (candidates[c].head != head) continue;
      const anchor& a = anchors[candidates[c].index];
      const std::size_t before = a.text.size() - k_min;  // the anchor's bytes before its window
      if ((cls & a.cls) == a.cls || at < before) continue;
      if (before >= 4 && load32(p + at - 4) != candidates[c].next) continue;
      if (std::memcmp(p + at - before, a.text.data(), before) == 0) cls |= a.cls;
    }
    return cls;
  }

  unsigned scan(std::string_view s) const {
    unsigned cls = 0;
    const std::size_t n = s.size();
    if (n < k_min) return 0;
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    auto m = [&](std::size_t i) -> unsigned { return mask[h(p[i - 1], p[i])]; };  // the bigram ending at p[i]
    constexpr unsigned k_full = 1u << (k_min - 2);                                // its k_min - 1 bigrams in place
    unsigned state = 0;
    std::size_t i = 1;
    for (; i + 7 <= n; i += 4) {  // one load for the block's five bytes (eight are read, all within the line)
      const std::uint64_t w = load64_le(p + i - 1);
      auto mw = [&](unsigned k) -> unsigned { return mask[(w >> (8 * k)) & 0xffffu]; };
      const unsigned block = ((mw(0) << 3) | 7u) & ((mw(1) << 2) | 3u) & ((mw(2) << 1) | 1u) & mw(3);
      state = ((state << 4) | 15u) & block;
      if ((state & (k_full * 15u)) == 0) continue;
      for (std::size_t j = 0; j < 4; ++j) {  // bit 3 + (3 - j): a window ends at p[i + j]
        if ((state & (k_full << (3 - j))) != 0) cls = check(p, i + j + 1 - k_min, h(p[i + j - 1], p[i + j]), cls);
      }
    }
    for (; i < n; ++i) {
      state = ((state << 1) | 1u) & m(i);
      if ((state & k_full) != 0) cls = check(p, i + 1 - k_min, h(p[i - 1], p[i]), cls);
    }
    return cls;
  }
};

const anchor_filter& prefilter() {
  static const anchor_filter f;
  return f;
}

}  // namespace

unsigned classify(std::string_view line) { return prefilter().scan(line); }

}  // namespace mrcheck::forms
