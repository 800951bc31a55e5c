// The cheap rejection (line_forms.h, classify): one Wu-Manber pass over the line finds which anchors occur, those of
// the form table's rows and the scanner's listeners' own; the ordinary line, the common case, stops here.
#include "form_matchers.h"

#include <algorithm>
#include <array>
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

// Wu-Manber (block of 2) over the anchors: a window of k_min bytes is checked only where its last bigram ends the
// k_min-prefix of some anchor; elsewhere it moves by up to k_min - 1 bytes.
struct wu_manber {
  std::vector<anchor> anchors;
  std::array<std::uint8_t, k_hash> shift{};
  std::array<std::vector<std::uint16_t>, k_hash> bucket;  // anchors whose k_min-prefix ends with this bigram

  static std::size_t h(unsigned char a, unsigned char b) { return (static_cast<std::size_t>(a) << 8) | b; }

  wu_manber() {
    for (std::string_view a : row_anchors()) {
      if (a.size() >= k_min) anchors.push_back({a, k_form});
    }
    for (const anchor& a : k_extra) anchors.push_back(a);
    shift.fill(static_cast<std::uint8_t>(k_min - 1));
    for (std::size_t i = 0; i < anchors.size(); ++i) {
      std::string_view a = anchors[i].text;
      for (std::size_t j = 1; j < k_min; ++j) {
        std::size_t x = h(static_cast<unsigned char>(a[j - 1]), static_cast<unsigned char>(a[j]));
        shift[x] = std::min<std::uint8_t>(shift[x], static_cast<std::uint8_t>(k_min - 1 - j));
      }
      bucket[h(static_cast<unsigned char>(a[k_min - 2]), static_cast<unsigned char>(a[k_min - 1]))].push_back(
          static_cast<std::uint16_t>(i));
    }
  }

  unsigned scan(std::string_view s) const {
    unsigned cls = 0;
    if (s.size() < k_min) return 0;
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    std::size_t pos = k_min - 1;
    const std::size_t n = s.size();
    while (pos < n) {
      std::size_t x = h(p[pos - 1], p[pos]);
      std::uint8_t sh = shift[x];
      if (sh != 0) {
        pos += sh;
        continue;
      }
      const std::size_t start = pos + 1 - k_min;
      for (std::uint16_t i : bucket[x]) {
        const anchor& a = anchors[i];
        if ((cls & a.cls) != a.cls && start + a.text.size() <= n &&
            std::memcmp(p + start, a.text.data(), a.text.size()) == 0) {
          cls |= a.cls;
        }
      }
      ++pos;
    }
    return cls;
  }
};

const wu_manber& prefilter() {
  static const wu_manber wm;
  return wm;
}

}  // namespace

unsigned classify(std::string_view line) { return prefilter().scan(line); }

}  // namespace mrcheck::forms
